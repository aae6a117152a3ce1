"""A group coordinator member through faults of the membership under it: a member whose
Lease is deleted joins again by itself (on the emulator and the real server), and a leave
or a join the server does not answer raises instead of leaving a member in the group that
nobody accounts for."""

from __future__ import annotations

import json
import pathlib
import threading
import time
import uuid
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

import kubecoord
from kubecoord import BackendUnavailableError, Coordinator
from kubecoord.api import GroupCoordinatorHandle
from kubecoord.group_coordinator import UnitsProtocol, decode_units
from kubecoord.wire import object_names
from kubecoord_testkit.faults import ThreadedFaultProxy
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST, Connect

UNITS = [f"u{index}" for index in range(4)]
SESSION = {"session_timeout": 2.0, "rebalance_timeout": 4.0}


def _member(coordinator: Coordinator, group: str, member_id: str) -> GroupCoordinatorHandle:
    return coordinator.group_coordinator(group, UnitsProtocol(UNITS), member_id=member_id, **SESSION)


def _group_events(log: pathlib.Path, member: str) -> list[str]:
    events = (json.loads(line) for line in log.read_text().splitlines())
    return [e["event"] for e in events if e["primitive"] == "group" and e["member"] == member
            and e["event"] != "renewed"]


def _units(member: GroupCoordinatorHandle) -> list[str]:
    return decode_units(member.assignment or b"")[0] if member.assignment else []


def test_a_member_whose_lease_was_deleted_joins_again_and_gets_units(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    group = f"expel-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"kubeconfig": str(cluster.admin_kubeconfig), **FAST}
    log = tmp_path / "a.jsonl"
    first = kubecoord.connect(cluster.url, history=str(log), **options)
    second = kubecoord.connect(cluster.url, **options)
    try:
        a, b = _member(first, group, "a"), _member(second, group, "b")
        a.join()
        b.join()
        eventually(lambda: a.is_stable() and b.is_stable() and a.generation == b.generation and _units(a), 30)
        before = a.generation
        lease = object_names.member_lease_name(group, "a")
        k8s.CoordinationV1Api(cluster.admin_api).delete_namespaced_lease(lease, cluster.namespace)
        # Expelled, then back: a later generation shares the units between both again.
        eventually(
            lambda: a.is_stable() and b.is_stable() and a.generation == b.generation > before
            and _units(a) and sorted(_units(a) + _units(b)) == UNITS,
            40,
        )
        eventually(lambda: _group_events(log, "a") == ["joined", "expired", "joined"])
    finally:
        second.close()
        first.close()


def test_a_leave_the_server_does_not_answer_raises_and_leave_again_leaves(
    connect: Connect, name: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "a.jsonl"
    a = _member(connect(history=str(log)), name, "a")
    a.join()
    eventually(lambda: a.is_stable(), 30)
    client = a._membership._context.client  # type: ignore[attr-defined]
    real_delete = client.delete

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailableError("cannot delete leases: connection reset by peer")

    monkeypatch.setattr(client, "delete", unreachable)
    with pytest.raises(BackendUnavailableError):
        a.leave()
    with pytest.raises(kubecoord.InvalidArgumentError, match="still leaving"):
        a.join()
    monkeypatch.setattr(client, "delete", real_delete)
    observer = connect().group_membership(name)
    assert observer.membership_list() == {"a"}  # still in, as the others see it
    a.leave()  # the retry leaves
    eventually(lambda: observer.membership_list() == set())
    eventually(lambda: _group_events(log, "a") == ["joined", "left"])
    a.join()  # and the handle may join again
    eventually(lambda: a.is_stable(), 30)


def test_a_join_whose_nomination_fails_is_undone(connect: Connect, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _member(connect(), name, "a")
    election = a._election  # type: ignore[attr-defined]

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailableError("cannot create leases: connection reset by peer")

    monkeypatch.setattr(election, "nominate", unreachable)
    with pytest.raises(BackendUnavailableError):
        a.join()
    assert connect().group_membership(name).membership_list() == set()  # not left in the group
    monkeypatch.undo()
    a.join()
    eventually(lambda: a.is_stable(), 30)


def test_a_member_cut_off_from_the_server_stops_confirming_before_its_units_move(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    """Its connection held (no error, no reset: silence), a member's watch cache still looks
    current, and with member Leases of 15 s its own membership still counts it in; a
    rebalance meanwhile (c joins) excludes it after rebalance_timeout and hands its units
    on. It must fail ensure_generation() before another member is given its units."""
    group = f"held-{uuid.uuid4().hex[:8]}"
    document = yaml.safe_load(cluster.admin_kubeconfig.read_text())
    scheme, _, address = document["clusters"][0]["cluster"]["server"].partition("://")
    host, _, port = address.rstrip("/").rpartition(":")
    got: dict[str, float] = {}  # unit -> when another member was given it
    lock = threading.Lock()

    def assigned(units: list[str]) -> None:
        with lock:
            for unit in units:
                got.setdefault(unit, time.monotonic())

    options: dict[str, Any] = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0,
                               "request_timeout": 1.0}
    admin = str(cluster.admin_kubeconfig)
    with ThreadedFaultProxy((host, int(port))) as proxy:
        document["clusters"][0]["cluster"]["server"] = f"{scheme}://{proxy.address}"
        held_config = tmp_path / "held.kubeconfig"
        held_config.write_text(yaml.safe_dump(document))
        with kubecoord.connect(cluster.url, kubeconfig=admin, **options) as first, \
                kubecoord.connect(cluster.url, kubeconfig=str(held_config), **options) as second, \
                kubecoord.connect(cluster.url, kubeconfig=admin, **options) as third:
            b = first.group_coordinator(group, UnitsProtocol(UNITS, on_assigned=assigned), member_id="b", **SESSION)
            b.join()  # first: b leads the group
            eventually(lambda: b.is_stable(), 30)
            a = second.group_coordinator(group, UnitsProtocol(UNITS), member_id="a", **SESSION)
            a.join()
            eventually(lambda: a.is_stable() and b.is_stable() and len(_units(a)) == 2, 30)
            with lock:
                got.clear()
            held = set(_units(a))
            proxy.hold()  # a's requests and watch events stall
            c = third.group_coordinator(group, UnitsProtocol(UNITS, on_assigned=assigned), member_id="c", **SESSION)
            c.join()
            last_confirmed = time.monotonic()
            deadline = time.monotonic() + 60
            watch_until = deadline
            while time.monotonic() < min(deadline, watch_until):
                try:
                    a.ensure_generation(a.generation)
                    last_confirmed = time.monotonic()
                except kubecoord.CoordinationError:
                    pass
                with lock:
                    if held <= set(got) and watch_until == deadline:
                        watch_until = time.monotonic() + 2 * SESSION["session_timeout"]  # and a while after
                time.sleep(0.01)
            assert held <= set(got), "a's units were never handed on"
            handed_on = min(got[unit] for unit in held)
            # a stopped counting itself in its generation before anyone was given its units.
            assert last_confirmed < handed_on, f"a confirmed {last_confirmed - handed_on:.2f} s after its units moved"
            proxy.release()
