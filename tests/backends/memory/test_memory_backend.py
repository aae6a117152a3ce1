"""What the memory backend adds to the contract: shared names, the manual clock, crashes."""

from __future__ import annotations

import pytest

import kubecoord
from kubecoord import ClosedError, InvalidArgumentError
from kubecoord.testing import ManualClock, crash, forget
from tests.helpers import Recorder


def test_private_and_shared_states() -> None:
    with kubecoord.connect("memory://") as a, kubecoord.connect("memory://") as b:
        a.storage("s").put("k", "v")
        assert b.storage("s").fetch("k").result() is None
    with kubecoord.connect("memory://shared-x") as a, kubecoord.connect("memory://shared-x") as b:
        a.storage("s").put("k", "v")
        assert b.storage("s").fetch("k").result() == "v"


def test_a_forgotten_name_starts_empty_and_only_memory_urls_are_forgotten() -> None:
    with kubecoord.connect("memory://forget-x") as a:
        a.storage("s").put("k", "v")
    forget("memory://forget-x")
    with kubecoord.connect("memory://forget-x") as b:
        assert b.storage("s").fetch("k").result() is None
    with pytest.raises(InvalidArgumentError):
        forget("zookeeper://127.0.0.1:2181")


def test_crashed_leader_keeps_leading_until_its_session_times_out() -> None:
    clock = ManualClock()
    url = "memory://crash-timing"
    leader = kubecoord.connect(url, clock=clock, lease_duration=10)
    follower = kubecoord.connect(url, clock=clock, lease_duration=10)
    assert leader.leader_election("svc").nominate("a")
    election = follower.leader_election("svc")
    seen: Recorder[str | None] = Recorder()
    election.add_listener(seen)
    assert not election.nominate("b")
    crash(leader)
    clock.advance(9.9)
    current = election.get_leader()
    assert current is not None and current.id == "a"
    assert not election.is_leader()
    clock.advance(0.2)
    seen.wait_last("b")
    assert election.is_leader("b")
    with pytest.raises(ClosedError):
        leader.leader_election("svc")
    follower.close()


def test_crashed_member_expires_on_the_clock() -> None:
    clock = ManualClock()
    url = "memory://member-expiry"
    doomed = kubecoord.connect(url, clock=clock, lease_duration=3)
    watcher = kubecoord.connect(url, clock=clock)
    doomed.group_membership("g").join("m")
    crash(doomed)
    group = watcher.group_membership("g")
    assert group.membership_list() == {"m"}
    clock.advance(3)
    assert group.membership_list() == set()
    watcher.close()


def test_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from kubecoord_testkit.demos.memory_scenario import scenario

    assert scenario("memory://demo-under-test") == 0
    out = capsys.readouterr().out
    assert "took over (epoch 1 -> 2)" in out
    assert "a stale write was refused" in out


def test_a_live_leader_renews_through_a_long_advance_of_the_manual_clock() -> None:
    """Lease semantics under a ManualClock: the jump is walked, so the live leader renews
    every 0.4 x lease_duration and never lets its lease lapse; the follower never takes over."""
    clock = ManualClock()
    url = "memory://walked-renewals"
    with kubecoord.connect(url, clock=clock, lease_duration=5) as a, kubecoord.connect(
        url, clock=clock, lease_duration=5
    ) as b:
        assert a.leader_election("svc").nominate("a")
        follower = b.leader_election("svc")
        assert not follower.nominate("b")
        clock.advance(60)  # twelve lease durations
        leader = follower.get_leader()
        assert leader is not None and (leader.id, leader.epoch) == ("a", 1)
        assert not follower.is_leader()


def test_under_a_manual_clock_the_first_nominated_follower_takes_over() -> None:
    """The walk steps candidates due at the same moment in nomination order: deterministic."""
    for attempt in range(20):
        clock = ManualClock()
        url = f"memory://takeover-order-{attempt}"
        coords = [kubecoord.connect(url, clock=clock, lease_duration=5) for _ in range(4)]
        elections = [c.leader_election("svc") for c in coords]
        assert [e.nominate(f"pod-{i}") for i, e in enumerate(elections)] == [True, False, False, False]
        crash(coords[0])
        clock.advance(6)
        assert elections[1].is_leader("pod-1"), attempt
        for coord in coords[1:]:
            coord.close()
