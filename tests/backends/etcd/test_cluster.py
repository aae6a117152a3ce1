"""A 3-member etcd cluster on loopback: the Raft leader — the member the clients talk to —
killed with -9 while a kubecoord candidate leads and a writer increments a counter, then
started again on its data. Never two leaders; the leader keeps its term (its lease outlives
Raft's re-election); no increment is lost or counted twice."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import kubecoord
from kubecoord.errors import BackendUnavailableError, OutcomeUnknownError, VersionConflictError
from kubecoord.testing import crash
from kubecoord_testkit.servers.etcd import EtcdCluster

TIMINGS: dict[str, Any] = {"lease_duration": 6, "renew_deadline": 4.0, "retry_period": 0.4, "request_timeout": 2.0}
"""A lease longer than a Raft re-election (~1-2 s on loopback, more on a loaded machine)."""


def _url_leader_first(cluster: EtcdCluster, prefix: str) -> tuple[str, int]:
    leader = cluster.leader()
    order = [leader, *(i for i in range(len(cluster.members)) if i != leader)]
    hosts = ",".join(f"127.0.0.1:{cluster.members[i].client_port}" for i in order)
    return f"etcd://{hosts}/{prefix}", leader


def test_raft_leader_killed_and_restarted_while_a_candidate_leads(etcd_cluster: EtcdCluster) -> None:
    url, raft_leader = _url_leader_first(etcd_cluster, f"c-{uuid.uuid4().hex[:8]}")
    first, second = kubecoord.connect(url, **TIMINGS), kubecoord.connect(url, **TIMINGS)
    a, b = first.leader_election("svc"), second.leader_election("svc")
    assert a.nominate("a")
    assert not b.nominate("b")
    epoch = a.get_leader().epoch  # type: ignore[union-attr]
    store = first.storage("counter")
    store.put("n", "0")
    applied, unknown = 0, 0
    stop = threading.Event()

    def increment() -> None:
        nonlocal applied, unknown
        while not stop.is_set():
            try:
                current = store.fetch_versioned("n").result()
                assert current is not None
                store.update("n", str(int(current.value) + 1), expected_version=current.version)
                applied += 1
            except OutcomeUnknownError:
                unknown += 1
            except (VersionConflictError, BackendUnavailableError):
                time.sleep(0.05)  # not applied (or nothing answered the read): try again

    writer = threading.Thread(target=increment)
    writer.start()
    time.sleep(1.0)
    etcd_cluster.kill(raft_leader)
    killed = time.monotonic()
    while time.monotonic() - killed < 8:
        assert not (a.is_leader("a") and b.is_leader("b")), "two leaders"
        time.sleep(0.02)
    etcd_cluster.restart(raft_leader)
    restarted = time.monotonic()
    while time.monotonic() - restarted < 3:
        assert not (a.is_leader("a") and b.is_leader("b")), "two leaders"
        time.sleep(0.02)
    stop.set()
    writer.join(30)
    assert a.is_leader("a") and not b.is_leader("b")
    assert a.get_leader() == b.get_leader() and a.get_leader().epoch == epoch  # type: ignore[union-attr]
    value = int(store.fetch("n").result() or "0")
    assert applied <= value <= applied + unknown, (value, applied, unknown)
    assert applied > 0
    # The restarted member has caught up: a client of that member alone reads the same.
    alone = kubecoord.connect(
        f"etcd://127.0.0.1:{etcd_cluster.members[raft_leader].client_port}/{url.rsplit('/', 1)[1]}", **TIMINGS
    )
    assert alone.storage("counter").fetch("n").result() == str(value)
    alone.close()
    first.close()
    second.close()


def test_a_killed_candidate_process_is_replaced_on_the_cluster(etcd_cluster: EtcdCluster) -> None:
    url, _ = _url_leader_first(etcd_cluster, f"c-{uuid.uuid4().hex[:8]}")
    crashed, other = kubecoord.connect(url, **TIMINGS), kubecoord.connect(url, **TIMINGS)
    a, b = crashed.leader_election("svc"), other.leader_election("svc")
    assert a.nominate("a")
    assert not b.nominate("b")
    crash(crashed)
    crashed_at = time.monotonic()
    while not b.is_leader("b"):
        assert time.monotonic() - crashed_at < TIMINGS["lease_duration"] + 10
        time.sleep(0.05)
    assert time.monotonic() - crashed_at > TIMINGS["lease_duration"] - 1.5  # only once a's lease expired
    other.close()
