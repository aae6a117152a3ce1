"""Contract: leader election (KIP-30 LeaderElectionClient) on every backend."""

from __future__ import annotations

import threading
import time

import pytest

import kubecoord
from kubecoord import InvalidArgumentError, Leader

from ..helpers import Recorder, eventually
from .harness import Harness


def test_single_leader_among_racing_candidates(harness: Harness, name: str) -> None:
    coordinators = [harness.connect() for _ in range(5)]
    elections = [c.leader_election(name) for c in coordinators]
    start = threading.Barrier(len(elections))
    won: dict[str, bool] = {}

    def run(index: int) -> None:
        start.wait()
        won[f"c{index}"] = elections[index].nominate(f"c{index}", data=f"data-{index}")

    # Safety at every instant, not only at the end: from before the race until the test's
    # last look, a sampler asks every candidate whether it leads, and never two may say so.
    # (No candidate resigns or loses here, so a sweep across the five cannot straddle a
    # handover: a takeover would wait out a whole lease.)
    done = threading.Event()
    both: list[list[int]] = []

    def sample() -> None:
        while not done.is_set():
            leading = [i for i, e in enumerate(elections) if e.is_leader()]
            if len(leading) > 1:
                both.append(leading)
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(elections))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(won.values()) <= 1, f"more than one nominate() reported leadership: {won}"

    def one_leads() -> bool:
        leading = [i for i, e in enumerate(elections) if e.is_leader()]
        assert len(leading) <= 1, f"more than one candidate leads in its own view: {leading}"
        return len(leading) == 1

    eventually(one_leads, harness.settle)
    holders = [i for i, e in enumerate(elections) if e.is_leader()]
    assert len(holders) == 1, f"more than one candidate leads in its own view: {holders}"
    leader = elections[holders[0]].get_leader()  # the holder's own view: its write, not a watch's
    assert leader is not None
    assert (leader.id, leader.data) == (f"c{holders[0]}", f"data-{holders[0]}")

    def everyone_sees_the_leader() -> bool:
        # The others see the record through their watches, which may lag the holder's own
        # write (a candidate that lost to the epoch mark before its watch delivered the record
        # reads None for ~0.1 s on the real kube-apiserver); a lagging view is no leader, never
        # another one, and the leader stays the only one leading meanwhile.
        views = [e.get_leader() for e in elections]
        assert all(view in (None, leader) for view in views), views
        assert [i for i, e in enumerate(elections) if e.is_leader()] == holders
        return all(view == leader for view in views)

    eventually(everyone_sees_the_leader, harness.settle)
    done.set()
    sampler.join()
    assert not both, f"two candidates led in their own views at once: {both[:5]}"


def test_observer_sees_leader_without_nominating(harness: Harness, name: str) -> None:
    candidate = harness.connect().leader_election(name)
    observer = harness.connect().leader_election(name)
    assert observer.get_leader() is None
    assert candidate.nominate("pod-a", data="host=10.0.0.7")
    eventually(lambda: observer.get_leader() is not None, harness.settle)
    leader = observer.get_leader()
    assert leader is not None
    assert (leader.id, leader.data) == ("pod-a", "host=10.0.0.7")
    assert leader.epoch >= 1
    assert not observer.is_leader()
    assert candidate.is_leader("pod-a")
    assert not candidate.is_leader("pod-b")


def test_resign_hands_over_and_listeners_see_it(harness: Harness, name: str) -> None:
    first = harness.connect().leader_election(name)
    second = harness.connect().leader_election(name)
    observer = harness.connect().leader_election(name)
    seen: Recorder[str | None] = Recorder()
    observer.add_listener(seen)

    assert first.nominate("a")
    assert not second.nominate("b")
    seen.wait_last("a", harness.settle)
    epoch_a = _leader(observer, "a", harness).epoch

    first.resign("a")
    seen.wait_last("b", harness.settle)
    leader_b = _leader(observer, "b", harness)
    assert leader_b.epoch > epoch_a
    eventually(lambda: second.is_leader("b"), harness.settle)  # b may learn of its win after the observer
    assert not first.is_leader()


def test_resign_by_non_leader_is_ignored(harness: Harness, name: str) -> None:
    first = harness.connect().leader_election(name)
    second = harness.connect().leader_election(name)
    assert first.nominate("a")
    assert not second.nominate("b")
    before = _leader(second, "a", harness)
    second.resign("b")
    second.resign("never-nominated")
    assert first.is_leader("a")
    assert second.get_leader() == before
    # b is still a candidate: when a resigns, b takes over.
    first.resign("a")
    _leader(second, "b", harness)


def test_close_releases_leadership(harness: Harness, name: str) -> None:
    leading = harness.connect()
    follower = harness.connect().leader_election(name)
    assert leading.leader_election(name).nominate("a")
    assert not follower.nominate("b")
    leading.close()
    _leader(follower, "b", harness)
    eventually(lambda: follower.is_leader("b"), harness.settle)


def test_epochs_strictly_increase_across_handovers(harness: Harness, name: str) -> None:
    elections = [harness.connect().leader_election(name) for _ in range(3)]
    observer = harness.connect().leader_election(name)
    epochs = []
    for round_ in range(6):
        election = elections[round_ % 3]
        election.nominate(f"r{round_}")
        leader = _leader(observer, f"r{round_}", harness)
        epochs.append(leader.epoch)
        election.resign(f"r{round_}")

        def resigned(r: int = round_) -> bool:
            return (observer.get_leader() or Leader("", "", 0)).id != f"r{r}"

        eventually(resigned, harness.settle)
    assert epochs == sorted(set(epochs)), f"epochs did not strictly increase: {epochs}"


def test_crashed_leader_is_replaced_after_expiry(harness: Harness, name: str) -> None:
    crashed = harness.connect()
    follower = harness.connect().leader_election(name)
    assert crashed.leader_election(name).nominate("a")
    assert not follower.nominate("b")
    epoch_a = _leader(follower, "a", harness).epoch
    harness.crash(crashed)
    harness.expire()
    leader = _leader(follower, "b", harness)
    assert leader.epoch > epoch_a


def test_listener_removed_and_raising_listener(harness: Harness, name: str) -> None:
    election = harness.connect().leader_election(name)
    removed: Recorder[str | None] = Recorder()
    kept: Recorder[str | None] = Recorder()

    def explode(_: str | None) -> None:
        raise RuntimeError("listener bug")

    election.add_listener(explode)
    election.add_listener(removed)
    election.add_listener(kept)
    election.remove_listener(removed)
    election.nominate("a")
    kept.wait_last("a", harness.settle)
    election.resign("a")
    election.nominate("b")
    kept.wait_last("b", harness.settle)
    assert removed.calls == []


@pytest.mark.parametrize("bad", ["", "a/b", "x" * 129, "nul\x00"])
def test_invalid_candidate_ids_are_rejected(harness: Harness, name: str, bad: str) -> None:
    election = harness.connect().leader_election(name)
    with pytest.raises(InvalidArgumentError):
        election.nominate(bad)
    assert election.get_leader() is None


@pytest.mark.parametrize("bad", ["", "Upper", "under_score", "-dash", "x" * 64])
def test_invalid_service_names_are_rejected(harness: Harness, bad: str) -> None:
    with pytest.raises(kubecoord.InvalidArgumentError):
        harness.connect().leader_election(bad)


def _leader(election: kubecoord.LeaderElection, expected: str, harness: Harness) -> Leader:
    eventually(lambda: (election.get_leader() or Leader("", "", 0)).id == expected, harness.settle)
    leader = election.get_leader()
    assert leader is not None
    return leader


def test_leading_until_is_the_leaders_own_deadline(harness: Harness, name: str) -> None:
    election = harness.connect().leader_election(name)
    follower = harness.connect().leader_election(name)
    assert election.leading_until("a") is None and election.leading_until() is None
    assert election.nominate("a")
    until = election.leading_until("a")
    assert until is not None and until > harness.now()
    assert election.is_leader("a") and election.leading_until() is not None
    assert election.leading_until("somebody-else") is None
    assert not follower.nominate("b")
    assert follower.leading_until("b") is None and follower.leading_until() is None
    election.resign("a")
    assert election.leading_until("a") is None
    eventually(lambda: follower.leading_until("b") is not None, harness.settle)


def test_per_election_timings_have_the_same_names_on_every_backend(harness: Harness, name: str) -> None:
    """leader_election(name, lease_duration=, renew_deadline=, retry_period=): the handle
    leads by its own renew deadline on every backend whose elections are leases; ZooKeeper's
    last as long as the session and refuse per-handle timings by name. A set of timings
    that breaks the lease rule is refused everywhere before any request."""
    coordinator = harness.connect()
    with pytest.raises(InvalidArgumentError, match="renew_deadline"):
        coordinator.leader_election(name, lease_duration=3, renew_deadline=5, retry_period=1)
    if harness.name == "zookeeper":
        with pytest.raises(InvalidArgumentError, match="lease_duration"):
            coordinator.leader_election(name, lease_duration=8, renew_deadline=6, retry_period=1)
        return
    election = coordinator.leader_election(name, lease_duration=8, renew_deadline=6, retry_period=1)
    assert election.nominate("own-timings")
    until = election.leading_until()
    assert until is not None
    # Every harness's own renew deadline is at most 4 s: 6 s can only be the handle's.
    assert 4.0 < until - harness.now() <= 6.0
