"""kubecoord and etcd's own recipes in one election and one lock: `etcdctl elect NAME` and
`etcdctl lock NAME` (concurrency.Election, concurrency.Mutex) against kubecoord's
election and lock of the same NAME (etcd:// without a PREFIX), both directions, handover
by resign and by kill -9 of either side; never two leaders or holders.

etcdctl elect's session has etcd's default TTL (60 s): a killed etcdctl leader is replaced
once that lease expires, so that test waits ~60 s.
"""

from __future__ import annotations

import time
import uuid

import pytest

import kubecoord
from kubecoord_testkit.servers.etcd import EtcdCluster

from .conftest import Spawn, read_line
from .etcdctl import Etcdctl
from .timings import LEASE_DURATION, TIMINGS

ETCDCTL_ELECT_TTL = 60


@pytest.fixture
def name() -> str:
    return f"i-{uuid.uuid4().hex[:10]}"


def _url(etcd: EtcdCluster) -> str:
    return f"etcd://{etcd.hosts}"


def _keys(etcd: EtcdCluster, name: str) -> list[str]:
    coord = kubecoord.connect(_url(etcd), **TIMINGS)
    try:
        leader = coord.leader_election(name).get_leader()
        return [] if leader is None else [leader.id]
    finally:
        coord.close()


def test_kubecoord_follows_etcdctl_elect_and_takes_over_after_its_kill_9(
    etcd_server: EtcdCluster, name: str, etcdctls: list[Etcdctl]
) -> None:
    peer = Etcdctl(etcd_server, "elect", name, "etcdctl-proposal")
    etcdctls.append(peer)
    elected = peer.next_line(15)
    assert elected is not None and elected.startswith(f"{name}/"), elected
    assert peer.next_line(5) == "etcdctl-proposal"
    coord = kubecoord.connect(_url(etcd_server), **TIMINGS)
    election = coord.leader_election(name)
    assert not election.nominate("kubecoord")
    leader = election.get_leader()
    assert leader is not None and leader.id == "etcdctl-proposal"
    assert leader.epoch > 0
    peer.kill()
    killed = time.monotonic()
    # The etcdctl's key stays until its 60 s lease expires: no takeover before that.
    while not election.is_leader("kubecoord"):
        assert time.monotonic() - killed < ETCDCTL_ELECT_TTL + 15, "kubecoord never took over"
        time.sleep(0.1)
    assert time.monotonic() - killed > ETCDCTL_ELECT_TTL - 5  # the lease expired first, not earlier
    new = election.get_leader()
    assert new is not None and new.id == "kubecoord" and new.epoch > leader.epoch
    coord.close()


def test_etcdctl_elect_waits_for_kubecoord_and_takes_over_after_its_kill_9(
    etcd_server: EtcdCluster, name: str, etcdctls: list[Etcdctl], spawn: Spawn
) -> None:
    candidate = spawn(_url(etcd_server), "elect", name, "kubecoord")
    line = read_line(candidate, 30)
    assert line is not None and line.startswith("leading "), line
    epoch = int(line.split()[1])
    peer = Etcdctl(etcd_server, "elect", name, "etcdctl-proposal")
    etcdctls.append(peer)
    assert peer.next_line(3) is None  # kubecoord leads: etcdctl waits
    assert _keys(etcd_server, name) == ["kubecoord"]
    candidate.kill()
    candidate.wait()
    killed = time.monotonic()
    elected = peer.wait_line(LEASE_DURATION + 10)
    assert elected is not None and elected[0].startswith(f"{name}/")
    assert elected[1] - killed > 1.0  # not before kubecoord's lease could expire
    assert peer.next_line(5) == "etcdctl-proposal"
    coord = kubecoord.connect(_url(etcd_server), **TIMINGS)
    leader = coord.leader_election(name).get_leader()
    coord.close()
    assert leader is not None and leader.id == "etcdctl-proposal" and leader.epoch > epoch


def test_resign_hands_over_to_etcdctl_elect_at_once(
    etcd_server: EtcdCluster, name: str, etcdctls: list[Etcdctl]
) -> None:
    coord = kubecoord.connect(_url(etcd_server), **TIMINGS)
    election = coord.leader_election(name)
    assert election.nominate("kubecoord")
    peer = Etcdctl(etcd_server, "elect", name, "etcdctl-proposal")
    etcdctls.append(peer)
    assert peer.next_line(2) is None
    resigned = time.monotonic()
    election.resign("kubecoord")
    assert not election.is_leader()
    elected = peer.wait_line(10)
    assert elected is not None and elected[1] - resigned < 2.0
    coord.close()


def test_kubecoord_lock_waits_for_etcdctl_lock_and_takes_it_after_its_kill_9(
    etcd_server: EtcdCluster, name: str, etcdctls: list[Etcdctl]
) -> None:
    peer = Etcdctl(etcd_server, "lock", "--ttl", "2", name)
    etcdctls.append(peer)
    held = peer.next_line(15)
    assert held is not None and held.startswith(f"{name}/"), held
    coord = kubecoord.connect(_url(etcd_server), **TIMINGS)
    lock = coord.lock(name, id="kubecoord")
    assert not lock.acquire(timeout=2)
    holders = lock.holders()
    assert len(holders) == 1 and holders[0].id != "kubecoord"
    peer.kill()
    killed = time.monotonic()
    assert lock.acquire(timeout=20)
    assert time.monotonic() - killed > 1.0  # etcdctl's 2 s lease expired first
    assert lock.token is not None and lock.token > holders[0].token
    lock.release()
    coord.close()


def test_etcdctl_lock_waits_for_kubecoord_lock_and_takes_it_after_its_kill_9(
    etcd_server: EtcdCluster, name: str, etcdctls: list[Etcdctl], spawn: Spawn
) -> None:
    holder = spawn(_url(etcd_server), "lock", name, "kubecoord")
    line = read_line(holder, 30)
    assert line is not None and line.startswith("holding "), line
    peer = Etcdctl(etcd_server, "lock", "--ttl", "2", name, "echo", "etcdctl-holds")
    etcdctls.append(peer)
    assert peer.next_line(3) is None  # kubecoord holds: etcdctl waits
    holder.kill()
    holder.wait()
    killed = time.monotonic()
    got = peer.wait_line(LEASE_DURATION + 10)
    assert got is not None and got[0] == "etcdctl-holds"
    assert got[1] - killed > 1.0


def test_kubecoord_lock_excludes_etcdctl_until_released(
    etcd_server: EtcdCluster, name: str, etcdctls: list[Etcdctl]
) -> None:
    coord = kubecoord.connect(_url(etcd_server), **TIMINGS)
    lock = coord.lock(name, id="kubecoord")
    assert lock.acquire(timeout=10)
    peer = Etcdctl(etcd_server, "lock", "--ttl", "2", name, "echo", "etcdctl-holds")
    etcdctls.append(peer)
    assert peer.next_line(2) is None
    assert lock.is_held()
    released = time.monotonic()
    lock.release()
    got = peer.wait_line(10)
    assert got is not None and got[0] == "etcdctl-holds" and got[1] - released < 2.0
    coord.close()
