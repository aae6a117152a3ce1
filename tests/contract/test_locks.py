"""Contract: locks and semaphores (coord.lock, coord.semaphore) on every backend."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence

import pytest

from kubecoord import InvalidArgumentError, Lock, LockHeldError, LockNotHeldError

from ..helpers import eventually
from .harness import Harness


def _race(locks: Sequence[Lock], rounds: int) -> list[tuple[float, float, int, str]]:
    """Every lock object in its own thread: acquire, hold briefly, release, ``rounds`` times.
    Returns (start, end, token, holder) per critical section, each checked in the holder's
    own view: is_held() True at its start and at its end."""
    sections: list[tuple[float, float, int, str]] = []
    guard = threading.Lock()
    start = threading.Barrier(len(locks))
    failures: list[BaseException] = []

    def run(lock: Lock) -> None:
        try:
            start.wait()
            for _ in range(rounds):
                assert lock.acquire(timeout=60)
                begin = time.monotonic()
                assert lock.is_held()
                token = lock.token
                assert token is not None  # held
                time.sleep(0.005)
                end = time.monotonic()
                assert lock.is_held(), "lost the lock inside a short critical section"
                with guard:
                    sections.append((begin, end, token, lock.id))
                lock.release()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(lock,)) for lock in locks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    return sorted(sections)


def _most_at_once(sections: list[tuple[float, float, int, str]]) -> int:
    """The most sections open at one instant (a sweep over their starts and ends; an end
    sorts before a start at the same instant: the sections are half-open). Counting the
    sections that overlap one section is not it: two that overlap a long one need not
    overlap each other."""
    edges = sorted([(begin, 1) for begin, *_ in sections] + [(end, -1) for _, end, *_ in sections])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def test_racing_holders_never_overlap_and_tokens_increase(harness: Harness, name: str) -> None:
    locks = [harness.connect().lock(name, id=f"p{i}") for i in range(4)]
    sections = _race(locks, rounds=3)
    assert len(sections) == 12
    for before, after in itertools.pairwise(sections):
        assert before[1] <= after[0], f"critical sections overlap: {before} and {after}"
        assert before[2] < after[2], f"tokens did not increase: {before} then {after}"


def test_acquire_release_token_and_holders(harness: Harness, name: str) -> None:
    first = harness.connect().lock(name, id="first", data="host=a")
    second = harness.connect().lock(name, id="second")
    assert first.holders() == []
    assert first.token is None and not first.is_held()
    assert first.acquire()
    token = first.token
    assert token is not None and token >= 1
    eventually(
        lambda: [(h.id, h.data, h.token) for h in second.holders()] == [("first", "host=a", token)], harness.settle
    )
    assert not second.acquire(blocking=False)
    began = time.monotonic()
    assert not second.acquire(timeout=0.3)
    assert time.monotonic() - began >= 0.3
    first.release()
    assert not first.is_held() and first.token is None
    eventually(lambda: first.holders() == [], harness.settle)
    # The timed-out attempts were withdrawn: nobody took the released lock.
    time.sleep(0.3)
    assert first.holders() == []
    assert second.acquire(timeout=harness.settle)
    assert second.token is not None and second.token > token
    second.release()


def test_not_reentrant_and_release_checks(harness: Harness, name: str) -> None:
    lock = harness.connect().lock(name)
    with pytest.raises(LockNotHeldError):
        lock.release()
    with lock:
        assert lock.is_held()
        with pytest.raises(LockHeldError):
            lock.acquire(blocking=False)
    assert not lock.is_held()
    with pytest.raises(LockNotHeldError):
        lock.release()


def test_release_hands_over_to_a_waiter_at_once(harness: Harness, name: str) -> None:
    holder = harness.connect().lock(name)
    waiter = harness.connect().lock(name)
    assert holder.acquire()
    got = threading.Event()
    acquired_at: list[float] = []

    def wait() -> None:
        assert waiter.acquire(timeout=30)
        acquired_at.append(time.monotonic())
        got.set()

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.5)  # the waiter is queued
    assert not got.is_set()
    released_at = time.monotonic()
    holder.release()
    thread.join(30)
    # Far below any lease duration: the watch, not expiry, handed it over.
    assert acquired_at and acquired_at[0] - released_at < 2.0
    waiter.release()


def test_crashed_holders_lock_returns_after_expiry(harness: Harness, name: str) -> None:
    doomed = harness.connect()
    holder = doomed.lock(name)
    assert holder.acquire()
    token = holder.token
    assert token is not None
    waiter = harness.connect().lock(name)
    assert not waiter.acquire(blocking=False)
    harness.crash(doomed)
    assert not holder.is_held()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(waiter.acquire(timeout=60)))
    thread.start()
    # Let time pass until the waiter wins (or 60 s). One jump is not enough on memory's manual
    # clock: a waiter that first sees the crashed record after the jump counts the lease from
    # then, so time must pass again after its candidacy exists. Real backends' expire() sleeps.
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        harness.expire()
        thread.join(0.5)
    thread.join(1)
    assert result == [True]
    assert waiter.token is not None and waiter.token > token
    waiter.release()


def test_cancel_withdraws_a_waiting_attempt(harness: Harness, name: str) -> None:
    holder = harness.connect().lock(name)
    waiter = harness.connect().lock(name)
    assert holder.acquire()
    cancel = threading.Event()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(waiter.acquire(cancel=cancel)))
    thread.start()
    time.sleep(0.3)
    cancel.set()
    thread.join(10)
    assert result == [False]
    holder.release()
    time.sleep(0.3)
    assert holder.holders() == []


def test_bad_input_is_refused_before_any_request(harness: Harness, name: str) -> None:
    coordinator = harness.connect()
    with pytest.raises(InvalidArgumentError):
        coordinator.lock("Not_A_Label")
    with pytest.raises(InvalidArgumentError):
        coordinator.lock(f"{name}-gc")  # a group coordinator's election
    with pytest.raises(InvalidArgumentError):
        coordinator.semaphore(f"{name}-gc", 2)
    with pytest.raises(InvalidArgumentError):
        coordinator.lock(name, id="")
    with pytest.raises(InvalidArgumentError):
        coordinator.lock(name).acquire(timeout=-1)
    for bad in (0, -1, True, 1.5, 101):
        with pytest.raises(InvalidArgumentError):
            coordinator.semaphore(name, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        coordinator.semaphore("x" * 62, 10)  # slot record x...-9 would not be a DNS-1123 label
    assert coordinator.lock(name).holders() == []


def test_semaphore_admits_at_most_n_and_tokens_increase_per_slot(harness: Harness, name: str) -> None:
    semaphores = [harness.connect().semaphore(name, 2, id=f"p{i}") for i in range(4)]
    sections = _race(semaphores, rounds=2)
    assert len(sections) == 8
    assert _most_at_once(sections) <= 2, f"more than 2 holders at once: {sections}"


def test_semaphore_slots_holders_and_crash(harness: Harness, name: str) -> None:
    doomed = harness.connect()
    first = doomed.semaphore(name, 2, id="first")
    second = harness.connect().semaphore(name, 2, id="second")
    third = harness.connect().semaphore(name, 2, id="third")
    assert first.acquire() and second.acquire()
    assert {first.slot, second.slot} == {0, 1}
    assert not third.acquire(blocking=False)
    eventually(lambda: sorted(h.id for h in third.holders()) == ["first", "second"], harness.settle)
    crashed_slot, crashed_token = first.slot, first.token
    harness.crash(doomed)
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(third.acquire(timeout=60)))
    thread.start()
    # Let time pass until the waiter wins (or 60 s). One jump is not enough on memory's manual
    # clock: a waiter that first sees the crashed record after the jump counts the lease from
    # then, so time must pass again after its candidacy exists. Real backends' expire() sleeps.
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        harness.expire()
        thread.join(0.5)
    thread.join(1)
    assert result == [True]
    assert third.slot == crashed_slot
    assert third.token is not None and crashed_token is not None and third.token > crashed_token
    second.release()
    third.release()


def test_semaphore_refuses_a_user_with_a_smaller_count(harness: Harness, name: str) -> None:
    big = [harness.connect().semaphore(name, 3, id=f"big{i}") for i in range(3)]
    for semaphore in big:
        assert semaphore.acquire(blocking=False)
    holder_of_slot_2 = next(s for s in big if s.slot == 2)
    small = harness.connect().semaphore(name, 2, id="small")
    eventually(lambda: bool(holder_of_slot_2.holders()), harness.settle)
    with pytest.raises(InvalidArgumentError):
        small.acquire(blocking=False)
    for semaphore in big:
        semaphore.release()


def test_election_runner_hands_over_on_stop(harness: Harness, name: str) -> None:
    events: list[tuple[str, str, int | None]] = []
    guard = threading.Lock()
    stops = {"a": threading.Event(), "b": threading.Event()}

    def runner(candidate: str) -> None:
        def lead(epoch: int, stop: threading.Event) -> None:
            with guard:
                events.append(("started", candidate, epoch))
            stop.wait()
            with guard:
                events.append(("work-stopped", candidate, epoch))

        def stopped() -> None:
            with guard:
                events.append(("stopped", candidate, None))

        election = harness.connect().leader_election(name)
        election.run(lead, stopped, candidate_id=candidate, stop=stops[candidate], signals=False)

    first = threading.Thread(target=runner, args=("a",))
    first.start()
    eventually(lambda: ("started", "a", events[0][2] if events else -1) in events, harness.settle)
    second = threading.Thread(target=runner, args=("b",))
    second.start()
    time.sleep(0.5)
    assert [e[0] for e in events] == ["started"]
    stops["a"].set()
    first.join(harness.settle)
    eventually(lambda: any(e[:2] == ("started", "b") for e in events), harness.settle)
    stops["b"].set()
    second.join(harness.settle)
    kinds = [(e[0], e[1]) for e in events]
    assert sorted(kinds) == sorted([(kind, c) for c in "ab" for kind in ("started", "work-stopped", "stopped")])
    for candidate in "ab":
        assert kinds.index(("started", candidate)) < kinds.index(("work-stopped", candidate)) < kinds.index(
            ("stopped", candidate))
    # The successor starts after the work stopped (the runner waits for it, then resigns);
    # a's on_stopped_leading comes after the resign, so b may already lead by then.
    assert kinds.index(("work-stopped", "a")) < kinds.index(("started", "b"))
    epochs = [e[2] for e in events if e[0] == "started"]
    assert epochs[0] is not None and epochs[1] is not None and epochs[0] < epochs[1]


def test_election_runner_stops_work_when_its_coordinator_crashes(harness: Harness, name: str) -> None:
    doomed = harness.connect()
    election = doomed.leader_election(name)
    started, stopped_work, stopped_cb = threading.Event(), threading.Event(), threading.Event()

    def lead(epoch: int, stop: threading.Event) -> None:
        started.set()
        stop.wait()
        stopped_work.set()

    thread = threading.Thread(
        target=election.run, args=(lead, stopped_cb.set), kwargs={"candidate_id": "x", "signals": False}
    )
    thread.start()
    assert started.wait(harness.settle)
    harness.crash(doomed)
    assert stopped_work.wait(harness.settle) and stopped_cb.wait(harness.settle)
    thread.join(harness.settle)
    assert not thread.is_alive()


def test_lock_run_returns_the_result_and_releases(harness: Harness, name: str) -> None:
    lock = harness.connect().lock(name)
    other = harness.connect().lock(name)
    tokens: list[int] = []

    def work(token: int, lost: threading.Event) -> str:
        tokens.append(token)
        assert not other.acquire(blocking=False)
        return "done"

    assert lock.run(work, signals=False) == "done"
    assert not lock.is_held() and tokens and tokens[0] >= 1
    assert other.acquire(timeout=harness.settle)
    assert lock.run(work, timeout=0.2, signals=False) is None  # not acquired in time: not called
    assert len(tokens) == 1
    other.release()


def test_held_until_ends_before_anybody_else_acquires(harness: Harness, name: str) -> None:
    """held_until() is None unless held; a crashed holder's last deadline passes before a
    waiter acquires (measured on the coordinators' clock, after the waiter's acquire()
    returned: an acquisition before the deadline would show as one)."""
    doomed = harness.connect()
    holder = doomed.lock(name)
    assert holder.held_until() is None
    assert holder.acquire()
    until = holder.held_until()
    assert until is not None and until > harness.now() and holder.is_held()
    waiter = harness.connect().lock(name)
    assert not waiter.acquire(blocking=False) and waiter.held_until() is None
    harness.crash(doomed)
    assert holder.held_until() is None
    acquired: list[float] = []

    def wait() -> None:
        if waiter.acquire(timeout=60):
            acquired.append(harness.now())

    thread = threading.Thread(target=wait)
    thread.start()
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        harness.expire()
        thread.join(0.5)
    thread.join(1)
    assert acquired, "the waiter never acquired"
    assert acquired[0] > until, f"acquired at {acquired[0]} before the crashed holder's deadline {until}"
    assert waiter.held_until() is not None
    waiter.release()
    assert waiter.held_until() is None
