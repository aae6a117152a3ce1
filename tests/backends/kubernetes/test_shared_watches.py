"""watch_scope="namespace"/"managed" (backends/kubernetes/informers.py) on the API emulator:
one list+watch per kind and namespace whatever the number of handles, the same behaviour
through the shared views, and lease-loop threads that do not grow with handles."""

from __future__ import annotations

import threading

from kubernetes import client as k8s

from kubecoord.wire import object_names
from kubecoord_testkit.emulator import ApiEmulator
from tests.helpers import Recorder, eventually

from .conftest import Connect

STEADY = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}
"""client-go's timings: a renewal every 2 s. Each renewal or heartbeat is a blocking request
on a lease-loop worker, and the pool adds workers while steps are overdue; with FAST's
every 0.5 s, 20 loops kept 11 requests in flight at load 18 and the pool grew past the
budget. Counted: the library's own threads (``kubecoord-*``), not the in-process API
emulator's or other tests' leftovers."""


def _threads(prefix: str) -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith(prefix) and thread.is_alive())


def test_handles_share_one_watch_per_kind_and_still_behave(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    shared = connect(watch_scope="namespace", **STEADY)
    before = _threads("kubecoord-")
    elections = [shared.leader_election(f"{name}-e{i}") for i in range(40)]
    groups = [shared.group_membership(f"{name}-g{i}") for i in range(10)]
    stores = [shared.storage(f"{name}-s{i}") for i in range(10)]
    for i, election in enumerate(elections):
        if i % 4 == 0:
            assert election.nominate(f"pod-{i}")
        else:
            assert election.get_leader() is None
    for i, group in enumerate(groups):
        group.join(f"m{i}", data=str(i))
    for i, store in enumerate(stores):
        store.put("k", str(i))
    assert shared._context.informers.open_informers == 2  # type: ignore[attr-defined]
    # 60 handles, 10 candidates, 10 members: a few shared threads, not one or two per handle.
    assert _threads("kubecoord-") - before <= 8, [t.name for t in threading.enumerate()]

    # Another process (coordinator) sees and takes over through its own shared watches.
    other = connect(watch_scope="namespace")
    leader_seen: Recorder[str | None] = Recorder()
    watched = other.leader_election(f"{name}-e0")
    watched.add_listener(leader_seen)
    leader_seen.wait_last("pod-0")
    assert not watched.nominate("pod-x")
    elections[0].resign("pod-0")
    leader_seen.wait_last("pod-x")
    members: Recorder[set[str]] = Recorder()
    other.group_membership(f"{name}-g3").add_listener(members)
    members.wait_last({"m3"})
    groups[3].leave("m3")
    members.wait_last(set())
    values: Recorder[str | None] = Recorder()
    other.listener_registry(f"{name}-s5").add_value_change_listener("k", values)
    stores[5].update("k", "new")
    values.wait_last("new")
    eventually(lambda: other.storage(f"{name}-s5").fetch("k").result() == "new")


def test_managed_scope_streams_only_kubecoord_leases(
    api_emulator: ApiEmulator, admin_api: k8s.ApiClient, connect: Connect, name: str
) -> None:
    k8s.CoordinationV1Api(admin_api).create_namespaced_lease(
        "default", {"metadata": {"name": f"{name}-foreign"}, "spec": {"holderIdentity": "someone"}}
    )
    api_emulator.reset_requests()
    coordinator = connect(watch_scope="managed")
    election = coordinator.leader_election(name)
    assert election.nominate("pod-a")
    lease_reads = [r for r in api_emulator.requests if r.resource == "leases" and r.verb in ("list", "watch")]
    assert lease_reads and all(
        r.query.get("labelSelector") == f"{object_names.MANAGED_BY_LABEL}={object_names.MANAGED_BY}"
        for r in lease_reads
    )
    informer = coordinator._context.informers  # type: ignore[attr-defined]
    assert informer.open_informers == 1


def test_lease_loops_share_a_few_threads(connect: Connect, name: str) -> None:
    coordinator = connect(**STEADY)
    before = _threads("kubecoord-steps")
    groups = [coordinator.group_membership(f"{name}-{i}") for i in range(30)]
    for i, group in enumerate(groups):
        group.join("w", data=str(i))
    eventually(lambda: all(group.membership_list() == {"w"} for group in groups))
    # 30 heartbeat/expiry loops (each used to be a thread of its own).
    assert _threads("kubecoord-steps") - before <= 8


def test_coordinators_of_one_process_share_the_namespace_watches(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    first = connect(watch_scope="namespace")
    first.leader_election(f"{name}-a").get_leader()
    api_emulator.reset_requests()
    second = connect(watch_scope="namespace")
    seen: Recorder[str | None] = Recorder()
    second.leader_election(f"{name}-b").add_listener(seen)
    assert not [r for r in api_emulator.requests if r.resource == "leases" and r.verb == "list" and not r.watch]
    # The first coordinator's crash does not take the shared watch from the second.
    first.simulate_crash()  # type: ignore[attr-defined]
    writer = connect()
    assert writer.leader_election(f"{name}-b").nominate("pod-w")
    seen.wait_last("pod-w")
