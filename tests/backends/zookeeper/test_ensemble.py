"""A 3-node ensemble on loopback: killing the ZooKeeper leader keeps sessions and data."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import kubecoord
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually

T = TypeVar("T")


def _when_available(call: Callable[[], T], timeout: float = 30.0) -> T:
    """Retry ``call`` while the ensemble re-elects (BackendUnavailableError), then return its result."""
    result: list[T] = []

    def attempt() -> bool:
        try:
            result.append(call())
        except kubecoord.BackendUnavailableError:
            return False
        return True

    eventually(attempt, timeout, interval=0.1)
    return result[0]


def test_killing_the_zookeeper_leader_keeps_leadership_members_and_data(zookeeper_ensemble: ZooKeeperServer) -> None:
    url = f"zookeeper://{zookeeper_ensemble.hosts}/ensemble"
    # 8 s sessions outlive the ensemble's re-election (about a second on loopback).
    with kubecoord.connect(url, lease_duration=8.0) as leading, kubecoord.connect(url, lease_duration=8.0) as other:
        election = leading.leader_election("svc")
        assert election.nominate("a", data="host-a")
        follower = other.leader_election("svc")
        assert not follower.nominate("b")
        leading.group_membership("workers").join("m1", data="d1")
        kv = other.storage("store")
        kv.put("topics/orders", "v1")
        epoch = (follower.get_leader() or kubecoord.Leader("", "", 0)).epoch

        old_leader = zookeeper_ensemble.leader()
        old_leader.kill()
        assert not old_leader.running

        eventually(lambda: any(s.mode() == "leader" for s in zookeeper_ensemble.servers if s.running), 30)
        assert _when_available(lambda: kv.update("topics/orders", "v2")) == 2
        assert _when_available(lambda: kv.fetch("topics/orders").result(10)) == "v2"
        leader = _when_available(follower.get_leader)
        assert leader is not None and (leader.id, leader.data, leader.epoch) == ("a", "host-a", epoch)
        eventually(lambda: election.is_leader("a"), 30)
        assert not follower.is_leader()
        members = _when_available(other.group_membership("workers").membership)
        assert members == {"m1": "d1"}

        # Leadership still hands over through the surviving quorum.
        _when_available(lambda: election.resign("a"))
        eventually(lambda: follower.is_leader("b"), 30)
        after = _when_available(follower.get_leader)
        assert after is not None and after.id == "b" and after.epoch > epoch
