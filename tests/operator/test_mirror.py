"""Status mirrors on the memory backend: what the operator writes to a resource's status
and which Events it posts, independent of kopf and of Kubernetes."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import kubecoord
from kubecoord.api import Coordinator
from kubecoord.operator.kinds.group.status import GroupMirror
from kubecoord.operator.kinds.kvstore import StoreMirror
from kubecoord.operator.kinds.leaderelection import LeaderMirror
from tests.helpers import eventually


class Wake:
    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self) -> None:
        self.event.set()

    def wait(self) -> None:
        assert self.event.wait(10), "the mirror was never woken"
        self.event.clear()


@pytest.fixture
def coord(request: pytest.FixtureRequest) -> Iterator[Coordinator]:
    with kubecoord.connect(f"memory://mirror-{request.node.name}") as coordinator:
        yield coordinator


def test_leader_mirror_follows_the_election_and_announces_each_change(coord: Coordinator) -> None:
    wake = Wake()
    mirror = LeaderMirror(coord, "billing", {}, wake)
    first = mirror.snapshot()
    assert first.status["leader"] is None and first.notices == []
    candidates = coord.leader_election("billing")
    candidates.nominate("pod-a", data="host=a")
    candidates.nominate("pod-b")
    wake.wait()
    elected = mirror.snapshot()
    assert elected.status["leader"] == "pod-a" and elected.status["leaderData"] == "host=a"
    assert [(n.reason, n.message) for n in elected.notices] == [
        ("LeaderElected", f"pod-a leads with epoch {elected.status['epoch']}")
    ]
    assert elected.changed_at is not None
    candidates.resign("pod-a")
    eventually(lambda: mirror.snapshot().status["leader"] == "pod-b")
    assert mirror.snapshot().status["epoch"] > elected.status["epoch"]
    mirror.close()


def test_leader_mirror_does_not_reannounce_the_leader_it_finds_in_the_status(coord: Coordinator) -> None:
    candidates = coord.leader_election("billing")
    candidates.nominate("pod-a")
    leader = candidates.get_leader()
    assert leader is not None
    previous = {"leader": "pod-a", "epoch": leader.epoch, "leaderSince": "2026-01-01T00:00:00Z"}
    mirror = LeaderMirror(coord, "billing", previous, Wake())
    snapshot = mirror.snapshot()
    assert snapshot.notices == [] and snapshot.status["leaderSince"] == "2026-01-01T00:00:00Z"
    mirror.close()


def test_group_mirror_counts_every_join_and_leave_in_the_generation(coord: Coordinator) -> None:
    wake = Wake()
    mirror = GroupMirror(coord, "workers", {"generation": 7, "members": [{"id": "old"}]}, wake)
    group = coord.group_membership("workers")
    group.join("w1", data="host=1")
    group.join("w2", data="host=2")
    eventually(lambda: mirror.snapshot().status["memberCount"] == 2)
    # "old" (from the previous status) is gone, w1 and w2 joined: three changes
    status = mirror.snapshot().status
    assert status["members"] == [{"id": "w1", "data": "host=1"}, {"id": "w2", "data": "host=2"}]
    assert status["generation"] == 10
    group.leave("w1")
    wake.wait()
    left = mirror.snapshot()
    assert left.gone == {"w1"} and left.joined == set() and left.status["generation"] == 11
    mirror.close()


def test_group_mirror_reports_who_joined_and_who_went(coord: Coordinator) -> None:
    mirror = GroupMirror(coord, "workers", {}, Wake())
    group = coord.group_membership("workers")
    group.join("w1")
    snapshot = mirror.snapshot()
    assert snapshot.joined == {"w1"} and [n.reason for n in snapshot.notices] == ["MemberJoined"]
    mirror.close()


def test_store_mirror_counts_nested_keys_and_bytes_and_wakes_on_deep_writes(coord: Coordinator) -> None:
    wake = Wake()
    mirror = StoreMirror(coord, "topics", 64, {}, wake)
    assert mirror.snapshot().status == {"keys": 0, "bytes": 0, "size": "0", "sizeLimitBytes": 64}
    kv = coord.storage("topics")
    kv.put("topics/orders/config", "partitions=3")
    wake.wait()
    status = mirror.snapshot().status
    assert status["keys"] == 1 and status["bytes"] == len("topics/orders/config") + len("partitions=3")
    kv.update("topics/orders/config", "partitions=12")  # a value change deep in the tree wakes the mirror
    wake.wait()
    assert mirror.snapshot().status["bytes"] == len("topics/orders/config") + len("partitions=12")
    kv.put("topics/payments", "x" * 40)
    wake.wait()
    over = mirror.snapshot()
    assert over.ready[0] is False and over.ready[1] == "SizeLimitExceeded"
    assert [n.reason for n in over.notices] == ["SizeLimitExceeded"]
    assert mirror.snapshot().notices == []  # announced once, not on every snapshot
    kv.delete("topics/payments")
    wake.wait()
    assert mirror.snapshot().ready[0] is True
    mirror.close()
