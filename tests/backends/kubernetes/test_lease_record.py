"""Lease <-> election record converters: client-go LeaseLock field compatibility."""

from __future__ import annotations

import datetime as dt
import json

from kubecoord.wire import object_names
from kubecoord.wire.lease import (
    LeaderRecord,
    format_micro_time,
    lease_with_record,
    parse_micro_time,
    record_from_lease,
    released,
)

T0 = dt.datetime(2026, 11, 22, 21, 47, 3, 123456, tzinfo=dt.UTC)

# A Lease as client-go's LeaseLock writes it (kube-apiserver v1.32 serialization).
CLIENT_GO_LEASE = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "billing", "namespace": "default", "resourceVersion": "42",
                 "annotations": {object_names.HOLDER_DATA_ANNOTATION: '{"holder":"old-python-pod","data":"stale"}'}},
    "spec": {
        "holderIdentity": "go-controller-7d9f",
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-11-22T21:47:03.123456Z",
        "renewTime": "2026-11-22T21:47:13.000001Z",
        "leaseTransitions": 4,
    },
}


def test_micro_time_is_rfc3339_utc_with_microseconds() -> None:
    assert format_micro_time(T0) == "2026-11-22T21:47:03.123456Z"
    assert format_micro_time(T0.astimezone(dt.timezone(dt.timedelta(hours=2)))) == "2026-11-22T21:47:03.123456Z"
    assert parse_micro_time("2026-11-22T21:47:03.123456Z") == T0
    assert parse_micro_time("2026-11-22T23:47:03.123456+02:00") == T0
    assert parse_micro_time("2026-11-22T21:47:03Z") == T0.replace(microsecond=0)
    assert parse_micro_time(None) is None and parse_micro_time("") is None


def test_reads_a_client_go_lease_and_ignores_another_holders_data() -> None:
    record = record_from_lease(CLIENT_GO_LEASE)
    assert record == LeaderRecord(
        holder="go-controller-7d9f", lease_duration_seconds=15, acquire_time=T0,
        renew_time=dt.datetime(2026, 11, 22, 21, 47, 13, 1, tzinfo=dt.UTC), transitions=4, data="",
    )


def test_round_trip_keeps_foreign_metadata_and_the_precondition() -> None:
    record = LeaderRecord("pod-a", 2, T0, T0, 5, data="host=10.0.0.7 ü")
    body = lease_with_record(CLIENT_GO_LEASE, record, name="billing", namespace="default")
    assert body["metadata"]["resourceVersion"] == "42"
    assert body["spec"] == {
        "holderIdentity": "pod-a", "leaseDurationSeconds": 2, "leaseTransitions": 5,
        "acquireTime": "2026-11-22T21:47:03.123456Z", "renewTime": "2026-11-22T21:47:03.123456Z",
    }
    assert json.loads(body["metadata"]["annotations"][object_names.HOLDER_DATA_ANNOTATION]) == {
        "holder": "pod-a", "data": "host=10.0.0.7 ü",
    }
    assert record_from_lease(body) == record
    assert CLIENT_GO_LEASE["spec"]["holderIdentity"] == "go-controller-7d9f"  # input untouched


def test_new_lease_and_release() -> None:
    record = LeaderRecord("pod-a", 15, T0, T0, 1)
    body = lease_with_record(None, record, name="svc", namespace="ns", labels={"a": "b"})
    assert body["metadata"] == {
        "name": "svc", "namespace": "ns", "labels": {"a": "b"},
        "annotations": {object_names.HOLDER_DATA_ANNOTATION: '{"holder":"pod-a","data":""}'},
    }
    later = T0 + dt.timedelta(seconds=3)
    gone = released(LeaderRecord("pod-a", 15, T0, T0, 7), later)
    assert (gone.holder, gone.lease_duration_seconds, gone.transitions, gone.renew_time) == ("", 1, 7, later)
    released_body = lease_with_record(body, gone, name="svc", namespace="ns")
    assert "annotations" not in released_body["metadata"]
    assert released_body["spec"]["holderIdentity"] == ""
    assert not record_from_lease(released_body).held


def test_empty_or_missing_spec_is_unheld() -> None:
    record = record_from_lease({"metadata": {"name": "x"}})
    assert not record.held and record.transitions == 0 and record.renew_time is None
