"""Three Cassandra nodes on 127.0.0.1-3 (RF 3, QUORUM and SERIAL): a node killed with -9
while a kubecoord candidate leads, then restarted. Quorums of two keep serving: the
election never has two leaders (their own logs), epochs increase, KV writes go on, and
after the restart the cluster serves writes at consistency ALL again.

The only module with the 3-node cluster (minutes to start on a loaded 2-core machine).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

import kubecoord
from kubecoord_testkit.servers.cassandra import CassandraServer
from tests.helpers import eventually

from .processes import assert_intervals_apart, intervals_in, read_events
from .timings import SESSION_TIMEOUT, TIMINGS

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(600)]


def _leader_id(election: kubecoord.LeaderElection) -> str | None:
    leader = election.get_leader()
    return leader.id if leader else None


def test_a_node_killed_and_restarted_while_leading(cassandra_cluster: CassandraServer, tmp_path: Path) -> None:
    url = f"cassandra://{cassandra_cluster.hosts}/kubecoord_cluster"
    options = {**TIMINGS, "replication_factor": 3}
    service, store = f"node-{uuid.uuid4().hex[:8]}", f"kv-{uuid.uuid4().hex[:8]}"
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("a", "b")}
    a_coordinator = kubecoord.connect(url, history=str(logs["a"]), **options)
    b_coordinator = kubecoord.connect(url, history=str(logs["b"]), **options)
    try:
        a, b = a_coordinator.leader_election(service), b_coordinator.leader_election(service)
        assert a.nominate("a")
        b.nominate("b")
        kv = b_coordinator.storage(store)
        kv.put("counter", "0")
        victim = cassandra_cluster.nodes[0]  # the first contact point of both clients
        victim.kill()
        # Two of three replicas answer: the election goes on (a keeps or hands over) and
        # KV writes succeed once the driver has marked the node down.
        eventually(lambda: a.is_leader() or b.is_leader(), SESSION_TIMEOUT * 5)
        for value in range(1, 6):
            def updated(v: int = value) -> bool:
                return _update(kv, str(v))

            eventually(updated, SESSION_TIMEOUT * 5)
        cassandra_cluster.restart(victim)
        eventually(lambda: a.is_leader() or b.is_leader(), SESSION_TIMEOUT * 5)
        leader = a if a.is_leader() else b
        epoch = (leader.get_leader() or kubecoord.Leader("", "", 0)).epoch
        time.sleep(SESSION_TIMEOUT)  # a quiet term after the restart: no change of leader
        assert (leader.get_leader() or kubecoord.Leader("", "", 0)).epoch == epoch
        assert kv.fetch_versioned("counter").result() == kubecoord.Versioned("5", 6)
    finally:
        a_coordinator.close()
        b_coordinator.close()
    found = [i for name, log in logs.items() for i in intervals_in(read_events(log), name, member=name)]
    assert_intervals_apart(found)


def _update(kv: kubecoord.Storage, value: str) -> bool:
    """One update to ``value`` (retried by eventually() only while the backend is unavailable)."""
    current = kv.fetch_versioned("counter").result()
    assert current is not None
    if current.value == value:
        return True  # an earlier try landed though its answer was lost
    try:
        kv.update("counter", value, expected_version=current.version)
    except kubecoord.BackendUnavailableError:
        return False
    return True
