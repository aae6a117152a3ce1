"""The election state machine (the lease core's Elector) step by step, against the memory
backend's record table (compare-and-set) and a manual clock: no server, no threads, no sleeps."""

from __future__ import annotations

import threading

import pytest

from kubecoord._core.lease import LeaderRecord, Observation, Timings
from kubecoord._core.lease.election import LeaseElection
from kubecoord.backends.memory.records import TableView
from kubecoord.history import EventLog
from kubecoord.testing import ManualClock
from tests.helpers import UnreachableTable, elector

TIMINGS = Timings(lease_duration=15, renew_deadline=10, retry_period=2)
NAME = "svc"


class Server(UnreachableTable):
    """memory://'s record table holding one record, with a switch that makes it fail like
    an unreachable server and a log of the writes (by holder; "" for a release)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, LeaderRecord]] = []
        self.gate: threading.Event | None = None
        """When set: a write is applied, then its answer waits for the gate (a slow reply)."""
        self.applied = threading.Event()

    @property
    def record(self) -> LeaderRecord | None:
        current = self.read(NAME)
        return current[0] if current is not None else None

    @property
    def version(self) -> int:
        current = self.read(NAME)
        return current[1] if current is not None else 0

    def answering(self, record: LeaderRecord) -> None:
        self.writes.append((record.holder, record))
        gate = self.gate
        if gate is not None:
            self.applied.set()
            gate.wait(10)


class View(TableView):
    """One process's RecordStore: what it observed, and when (on its own clock)."""

    def __init__(self, server: Server, clock: ManualClock) -> None:
        super().__init__(server, NAME, clock)
        self.server = server

    def watch(self) -> Observation | None:
        """Deliver the server's current version, as a watch event would (none while it is down)."""
        return self.observed() if self.server.down else self.deliver()


class Candidate:
    def __init__(self, name: str, server: Server, clock: ManualClock, wall: float = 1_000_000.0) -> None:
        """``wall``: this process's wall clock at manual time 0 (it ticks with the clock)."""
        self.view = View(server, clock)
        self.changes: list[bool] = []
        self.elector = elector(name, self.view, clock, TIMINGS, data=f"data-{name}", wall=lambda: wall + clock.now(),
                               on_change=lambda _elector, leading: self.changes.append(leading))

    def step(self) -> float:
        self.view.watch()
        return self.elector.step()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def server() -> Server:
    return Server()


def test_first_candidate_creates_the_record_and_leads(server: Server, clock: ManualClock) -> None:
    a = Candidate("a", server, clock)
    assert a.step() == TIMINGS.retry_period
    assert a.elector.is_leader() and a.changes == [True]
    assert server.record is not None
    assert (server.record.holder, server.record.transitions, server.record.lease_duration_seconds) == ("a", 1, 15)
    assert server.record.data == "data-a"


def test_follower_waits_out_the_lease_from_its_own_observation(server: Server, clock: ManualClock) -> None:
    a = Candidate("a", server, clock)
    a.step()
    # b's wall clock is years ahead: renewTime comparisons would call the lease expired.
    b = Candidate("b", server, clock, wall=9_000_000_000.0)
    clock.advance(5)
    assert b.step() == pytest.approx(15)  # it has just seen the record: 15 s from now
    writes = len(server.writes)
    clock.advance(14.9)
    b.step()
    assert len(server.writes) == writes and not b.elector.is_leader()
    clock.advance(0.2)
    b.step()
    assert b.elector.is_leader()
    assert server.record is not None and (server.record.holder, server.record.transitions) == ("b", 2)


def test_a_renewal_changes_the_record_and_restarts_followers_countdown(server: Server, clock: ManualClock) -> None:
    a = Candidate("a", server, clock)
    b = Candidate("b", server, clock)
    a.step()
    b.step()
    first = server.record
    for _ in range(10):  # 20 s of renewals every retry period: longer than a lease
        clock.advance(TIMINGS.retry_period)
        a.step()
        assert b.step() > 0
        assert not b.elector.is_leader()
    assert server.record is not None and first is not None
    assert server.record.renew_time is not None and first.renew_time is not None
    assert server.record.renew_time > first.renew_time
    assert server.record.holder == "a" and server.record.transitions == 1


def test_leader_that_cannot_renew_reports_loss_before_anyone_can_acquire(server: Server, clock: ManualClock) -> None:
    a = Candidate("a", server, clock)
    b = Candidate("b", server, clock)
    a.step()
    b.step()
    server.down = True
    lost_at = None
    for _ in range(200):
        clock.advance(0.1)
        a.step()
        if lost_at is None and a.changes[-1] is False:
            lost_at = clock.now()
    assert lost_at is not None
    assert lost_at - 1000.0 <= TIMINGS.renew_deadline + 0.1 < TIMINGS.lease_duration
    assert not a.elector.is_leader()
    server.down = False
    writes_by_a = sum(1 for who, _ in server.writes if who == "a")
    b.step()  # b saw the record at t=0 and never since: expired now (t = 20 s)
    assert b.elector.is_leader()
    a.step()  # a is a follower now; it sees b's record and does not write
    assert sum(1 for who, _ in server.writes if who == "a") == writes_by_a


def test_is_leader_turns_false_from_the_clock_alone(server: Server, clock: ManualClock) -> None:
    """A process resumed after SIGSTOP: no step has run yet, is_leader() already says no."""
    a = Candidate("a", server, clock)
    a.step()
    assert a.elector.is_leader()
    clock.advance(TIMINGS.renew_deadline)
    assert not a.elector.is_leader()
    writes = len(server.writes)
    a.step()  # the first step after resuming reports the loss and writes nothing
    assert a.changes == [True, False]
    assert len(server.writes) == writes


def test_release_writes_an_empty_holder_and_a_follower_takes_over_at_once(server: Server, clock: ManualClock) -> None:
    a = Candidate("a", server, clock)
    b = Candidate("b", server, clock)
    a.step()
    b.step()
    assert a.elector.release()
    assert server.record is not None
    assert (server.record.holder, server.record.transitions, server.record.lease_duration_seconds) == ("", 1, 1)
    assert a.changes == [True, False] and not a.elector.is_leader()
    b.step()  # no time passed: a release is free to take
    assert b.elector.is_leader()
    assert (server.record.holder, server.record.transitions) == ("b", 2)


def test_racing_followers_one_wins_the_other_rereads(server: Server, clock: ManualClock) -> None:
    a = Candidate("a", server, clock)
    a.step()
    a.elector.release()
    b, c = Candidate("b", server, clock), Candidate("c", server, clock)
    b.view.watch()
    c.view.watch()
    assert b.elector.step() == TIMINGS.retry_period and b.elector.is_leader()
    delay = c.elector.step()  # based on the released version: 409, re-read, judge again
    assert delay == 0.0 and not c.elector.is_leader()
    assert c.elector.step() > 0 and not c.elector.is_leader()
    assert server.record is not None and server.record.holder == "b"


def test_a_late_renewal_answer_counts_as_lost(server: Server, clock: ManualClock) -> None:
    a = Candidate("a", server, clock)
    a.step()
    original = server.write

    def slow_write(name: str, record: LeaderRecord, expected: int | None) -> int:
        clock.advance(TIMINGS.renew_deadline)  # the request hung until past the deadline
        return original(name, record, expected)

    server.write = slow_write  # type: ignore[method-assign]
    clock.advance(TIMINGS.retry_period)
    a.step()
    assert a.changes == [True, False] and not a.elector.is_leader()


def test_overtaken_leader_steps_down_when_the_watch_shows_another_holder(server: Server, clock: ManualClock) -> None:
    a = Candidate("a", server, clock)
    a.step()
    # A client-go peer with a different view takes the lease over a's version.
    server.write(NAME, LeaderRecord("go", 15, None, None, 2), server.version)
    clock.advance(0.5)
    a.step()
    assert a.changes == [True, False] and not a.elector.is_leader()


@pytest.mark.parametrize(
    ("lease", "deadline", "retry"),
    [(10, 10, 2), (5, 10, 2), (15, 2.4, 2), (15, 10, 0), (-1, 10, 2), (15, float("nan"), 2)],
)
def test_timings_are_validated_like_client_go(lease: float, deadline: float, retry: float) -> None:
    from kubecoord import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        Timings(lease_duration=lease, renew_deadline=deadline, retry_period=retry)


def test_timings_defaults_and_whole_seconds() -> None:
    assert Timings() == Timings(15, 10, 2)
    assert Timings(2.5, 2, 1).lease_duration_seconds == 3
    assert Timings(15, 10, 2).with_overrides(lease_duration=20).lease_duration == 20


def test_a_hand_edited_lease_duration_is_overwritten_with_our_own(server: Server, clock: ManualClock) -> None:
    """An edit of leaseDurationSeconds (1 s) must not stick: a leader writing the edited value
    lets followers take over 1 s after each renewal while it still leads (client-go always
    writes its own duration)."""
    a = Candidate("a", server, clock)
    a.step()
    edited = server.record
    assert edited is not None
    server.write(NAME, LeaderRecord("a", 1, edited.acquire_time, edited.renew_time, edited.transitions), server.version)
    after_edit = len(server.writes)
    for _ in range(3):
        clock.advance(TIMINGS.retry_period)
        while a.step() == 0.0:
            pass
    assert a.elector.is_leader()
    assert server.record is not None and server.record.lease_duration_seconds == TIMINGS.lease_duration
    renewals = server.writes[after_edit:]
    assert renewals and all(record.lease_duration_seconds == TIMINGS.lease_duration for _, record in renewals)


def test_epochs_never_go_backwards_when_transitions_are_edited_down(server: Server, clock: ManualClock) -> None:
    # A record left at epoch 7 by earlier terms.
    server.write(NAME, LeaderRecord("", 1, None, None, 7), None)
    a = Candidate("a", server, clock)
    b = Candidate("b", server, clock)
    a.step()
    b.step()
    assert a.elector.epoch == 8
    # Someone edits leaseTransitions down while a holds the record.
    current = server.record
    assert current is not None
    server.write(NAME, LeaderRecord("a", 15, current.acquire_time, current.renew_time, 2), server.version)
    clock.advance(TIMINGS.retry_period)
    while a.step() == 0.0:
        pass
    b.step()
    assert a.elector.is_leader() and a.elector.epoch == 8
    assert server.record is not None and server.record.transitions == 8
    # A record re-created lower behind everybody's back: the next leader still goes up,
    # after a whole lease (a record free below the mark is no release: its holder may lead).
    a.elector.release()
    server.write(NAME, LeaderRecord("", 1, None, None, 1), server.version)
    b.step()
    assert not b.elector.is_leader()
    clock.advance(TIMINGS.lease_duration)
    b.step()
    assert b.elector.is_leader() and b.elector.epoch == 9
    assert server.record is not None and server.record.transitions == 9


def _delete_record(server: Server) -> None:
    """The record deleted by hand (kubectl delete lease): memory:// itself has no such call."""
    with server._lock:
        server._records.pop(NAME, None)


def test_a_fresh_candidate_goes_above_the_mark_when_the_record_was_edited_down(
    server: Server, clock: ManualClock
) -> None:
    """Before the mark, a candidate that never saw the record took the edited value + 1."""
    a = Candidate("a", server, clock)
    a.step()
    assert a.elector.epoch == 1
    a.elector.release()
    b = Candidate("b", server, clock)
    b.step()
    assert b.elector.epoch == 2
    b.elector.release()
    server.write(NAME, LeaderRecord("", 1, None, None, 0), server.version)
    c = Candidate("c", server, clock)
    c.step()  # free below the mark: no release; it waits a whole lease (6a)
    assert not c.elector.is_leader()
    clock.advance(TIMINGS.lease_duration)
    c.step()
    assert c.elector.is_leader() and c.elector.epoch == 3
    assert server.read_mark(NAME) == (3, 3)


def test_a_candidate_that_finds_the_mark_without_the_record_waits_a_lease_then_goes_above(
    server: Server, clock: ManualClock
) -> None:
    """The record deleted while its holder still leads: a process that never saw it finds
    the mark, waits a whole lease (the holder's renew deadline ends first), and its epoch
    is above the holder's."""
    a = Candidate("a", server, clock)
    a.step()
    a.elector.abandon()  # frozen: it still believes it leads until its renew deadline
    _delete_record(server)
    c = Candidate("c", server, clock)
    writes = len(server.writes)
    assert c.step() == pytest.approx(TIMINGS.lease_duration)
    assert len(server.writes) == writes and not c.elector.is_leader()
    clock.advance(TIMINGS.lease_duration)
    c.step()
    assert c.elector.is_leader() and c.elector.epoch == 2


class _RacedMark(Server):
    """A record write applied, and before its answer comes back another candidate's write
    takes the mark to the same epoch (the record was deleted between the two)."""

    def answering(self, record: LeaderRecord) -> None:
        super().answering(record)
        if record.holder == "late" and self.read_mark(NAME) is None:
            self.write_mark(NAME, record.transitions, None)


def test_of_two_candidates_that_wrote_one_epoch_only_the_one_that_raised_the_mark_leads(clock: ManualClock) -> None:
    server = _RacedMark()
    late = Candidate("late", server, clock)
    late.step()
    assert server.record is not None and (server.record.holder, server.record.transitions) == ("late", 1)
    assert not late.elector.is_leader() and late.changes == []  # epoch 1 is somebody else's
    # Its record expires like a crashed holder's; the next term is above the mark.
    clock.advance(TIMINGS.lease_duration)
    late.step()
    assert late.elector.is_leader() and late.elector.epoch == 2


# -- resign through the election handle (the lease core's LeaseElection) ----------------


class _Owner:
    backend = "memory"

    def check_open(self) -> None:
        pass


class Handle(LeaseElection):
    """The lease core's election handle over Server, stepped by the test (no threads)."""

    def __init__(self, server: Server, clock: ManualClock) -> None:
        super().__init__(
            _Owner(), "svc", EventLog(), timings=TIMINGS, clock=clock, wall=lambda: 1_000_000.0 + clock.now()
        )
        self.server = server
        self.clock = clock
        self.observer = View(server, clock)

    def _store(self, candidate_id: str) -> View:
        view = View(self.server, self.clock)
        view.watch()
        return view

    def _view(self, *, start: bool) -> Observation | None:
        return self.observer.watch()

    def _notify(self, leader: str | None) -> None:
        pass

    def _threaded(self) -> bool:
        return False

    def step(self) -> None:
        for candidate in list(self._candidates.values()):
            assert isinstance(candidate.store, View)
            candidate.store.watch()
            candidate.step_now()


def _lapse(handle: Handle, server: Server, clock: ManualClock) -> None:
    """Keep the leader from renewing past its renew deadline (a loaded machine, a slow
    server), then let the server answer again: the record still names it."""
    server.down = True
    while handle.is_leader("a"):
        clock.advance(0.5)
        handle.step()
    server.down = False


def test_resign_of_a_holder_whose_renew_deadline_lapsed_releases_and_withdraws(
    server: Server, clock: ManualClock
) -> None:
    """A resign that lands while the holder's own deadline has lapsed (nobody took over:
    it would take the record back at expiry) is not ignored: the record is released and
    the candidate never writes again. Before: resign was a no-op, the candidate stayed
    nominated and re-acquired at expiry, and observers saw it lead for ever after."""
    handle = Handle(server, clock)
    assert handle.nominate("a")
    _lapse(handle, server, clock)
    assert server.record is not None and server.record.holder == "a"
    handle.resign("a")
    assert server.record is not None and server.record.holder == ""
    writes = len(server.writes)
    for _ in range(4 * int(TIMINGS.lease_duration)):
        clock.advance(1.0)
        handle.step()
    assert len(server.writes) == writes
    handle.nominate("a")  # withdrawn: the id may be nominated again
    assert handle.is_leader("a")


def test_resign_while_the_acquire_is_in_flight_waits_for_it_and_releases(server: Server, clock: ManualClock) -> None:
    """The contract test's race on a real server: the acquire's write is applied (another
    client's watch shows the candidate leading, so the caller resigns it) while its answer
    is still on its way. resign() waits for that step and releases. Before: is_leader()
    was still False, the resign was ignored, and the candidate led on for good."""
    handle = Handle(server, clock)
    server.gate = gate = threading.Event()
    nominating = threading.Thread(target=handle.nominate, args=("b",))
    nominating.start()
    assert server.applied.wait(10)
    seen = handle.observer.watch()
    assert seen is not None and seen.record.holder == "b"  # what the observer client reads
    resigning = threading.Thread(target=handle.resign, args=("b",))
    resigning.start()
    resigning.join(0.2)
    server.gate = None
    gate.set()
    nominating.join(10)
    resigning.join(10)
    assert not nominating.is_alive() and not resigning.is_alive()
    assert server.record is not None and server.record.holder == ""
    writes = len(server.writes)
    for _ in range(4 * int(TIMINGS.lease_duration)):
        clock.advance(1.0)
        handle.step()
    assert len(server.writes) == writes and not handle.is_leader()


def test_a_release_over_an_edit_that_still_names_the_holder_is_retried(server: Server, clock: ManualClock) -> None:
    """Someone wrote the record since the holder's last write (an annotation edit, or its
    own renewal that landed after its request timed out) but it still names the holder:
    the release re-reads and releases that version. Before: the 409 was logged and the
    record left held for a whole lease."""
    handle = Handle(server, clock)
    assert handle.nominate("a")
    current = server.record
    assert current is not None
    server.write(NAME, current._replace(data="edited"), server.version)
    handle.resign("a")
    assert server.record is not None and server.record.holder == ""


def test_a_withdrawn_elector_never_writes_again(server: Server, clock: ManualClock) -> None:
    """A step that races the withdrawal (memory's watch pokes candidates from the writer's
    thread; a scheduler's snapshot) must not re-acquire what the release freed."""
    a = Candidate("a", server, clock)
    a.step()
    assert a.elector.release()
    writes = len(server.writes)
    clock.advance(TIMINGS.retry_period)
    a.step()
    a.elector.abandon()
    a.step()
    assert len(server.writes) == writes
