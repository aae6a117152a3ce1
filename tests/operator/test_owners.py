"""controller.owners: which resources a Lease or ConfigMap event wakes, and which Lease
changes (renewals) wake none."""

from __future__ import annotations

import copy
from typing import Any

from kubecoord.operator.controller.owners import RouteIndex, lease_moved
from kubecoord.wire import object_names

ELECTION = ("leaderelections", "ns", "svc")
GROUP = ("groups", "ns", "jobs")
STORE = ("kvstores", "ns", "cfg")


def _lease(name: str, holder: str = "a", renew: str = "2026-01-01T00:00:00.000000Z", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1", "labels": dict(labels)},
            "spec": {"holderIdentity": holder, "leaseTransitions": 3, "leaseDurationSeconds": 15,
                     "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": renew}}


def _index() -> RouteIndex:
    index = RouteIndex()
    index.add(ELECTION, [("leases", "", "svc")])
    index.add(GROUP, [("leases", object_names.GROUP_LABEL, "jobs"),
                      ("configmaps", object_names.STORE_LABEL, "jobs-gc")])
    index.add(STORE, [("configmaps", object_names.STORE_LABEL, "cfg")])
    return index


def test_an_event_wakes_the_resources_reading_the_object() -> None:
    index = _index()
    member = _lease("jobs.m.w1-0123", **{object_names.GROUP_LABEL: "jobs"})
    assert index.lookup("ns", "leases", "svc", None, _lease("svc")) == [ELECTION]
    assert index.lookup("ns", "leases", member["metadata"]["name"], None, member) == [GROUP]
    assert index.lookup("ns", "leases", member["metadata"]["name"], member, None) == [GROUP]  # deleted
    shard = {"metadata": {"name": "kubecoord-kv.cfg.2", "labels": {object_names.STORE_LABEL: "cfg"}}}
    assert index.lookup("ns", "configmaps", "kubecoord-kv.cfg.2", None, shard) == [STORE]
    record = {"metadata": {"name": "kubecoord-kv.jobs-gc", "labels": {object_names.STORE_LABEL: "jobs-gc"}}}
    assert index.lookup("ns", "configmaps", "kubecoord-kv.jobs-gc", record, record) == [GROUP]
    # Another namespace, another kind, an unrelated object: nobody.
    assert index.lookup("other", "leases", "svc", None, _lease("svc")) == []
    assert index.lookup("ns", "configmaps", "svc", None, _lease("svc")) == []
    assert index.lookup("ns", "leases", "unrelated", None, _lease("unrelated")) == []


def test_a_label_moved_wakes_both_owners_and_removed_routes_wake_nobody() -> None:
    index = _index()
    index.add(("groups", "ns", "other"), [("leases", object_names.GROUP_LABEL, "other")])
    old = _lease("x", **{object_names.GROUP_LABEL: "jobs"})
    new = _lease("x", **{object_names.GROUP_LABEL: "other"})
    assert sorted(index.lookup("ns", "leases", "x", old, new)) == sorted([GROUP, ("groups", "ns", "other")])
    index.remove(GROUP, [("leases", object_names.GROUP_LABEL, "jobs"),
                         ("configmaps", object_names.STORE_LABEL, "jobs-gc")])
    assert index.lookup("ns", "leases", "x", old, old | {"spec": {"holderIdentity": "b"}}) == []
    index.remove(ELECTION, [("leases", "", "svc")])
    index.remove(STORE, [("configmaps", object_names.STORE_LABEL, "cfg")])
    index.remove(("groups", "ns", "other"), [("leases", object_names.GROUP_LABEL, "other")])
    assert len(index) == 0


def test_two_resources_reading_one_object_are_both_woken() -> None:
    index = _index()
    index.add(("kvstores", "ns", "jobs-gc"), [("configmaps", object_names.STORE_LABEL, "jobs-gc")])
    record = {"metadata": {"name": "kubecoord-kv.jobs-gc", "labels": {object_names.STORE_LABEL: "jobs-gc"}}}
    assert sorted(index.lookup("ns", "configmaps", record["metadata"]["name"], None, record)) == sorted(
        [GROUP, ("kvstores", "ns", "jobs-gc")])


def test_a_renewal_wakes_nobody_anything_else_does() -> None:
    index = _index()
    old = _lease("svc")
    renewed = _lease("svc", renew="2026-01-01T00:00:02.000000Z")
    renewed["metadata"]["resourceVersion"] = "2"
    assert not lease_moved(old, renewed)
    assert index.lookup("ns", "leases", "svc", old, renewed) == []
    for change in (
        lambda lease: lease["spec"].update(holderIdentity="b"),
        lambda lease: lease["spec"].update(leaseTransitions=4),
        lambda lease: lease["spec"].update(leaseDurationSeconds=1),  # a release
        lambda lease: lease["spec"].update(acquireTime="2026-01-01T00:00:05.000000Z"),
        lambda lease: lease["metadata"].setdefault("annotations", {}).update(
            {object_names.HOLDER_DATA_ANNOTATION: "new data"}),
        lambda lease: lease["metadata"].update(ownerReferences=[{"uid": "u"}]),
    ):
        moved = copy.deepcopy(renewed)
        change(moved)
        assert lease_moved(old, moved)
        assert index.lookup("ns", "leases", "svc", old, moved) == [ELECTION]
    assert lease_moved(None, old) and lease_moved(old, None)
