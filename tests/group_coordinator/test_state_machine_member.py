"""The group member (kubecoord.group_coordinator) as a Hypothesis state machine: three
processes (memory:// coordinators sharing one state on a manual clock) join, leave, close
and reopen their member, crash (kill -9) and come back as new processes, ask for a
rebalance, while the clock jumps (sessions expire, the leader's fence and rebalance
timers pass). Eager (sticky) and cooperative (cooperative-sticky) members.

After every step, once the members' threads are idle (quiesce()):

- no unit is assigned twice in one generation, in anyone's view (every on_join_complete
  of every member handle is kept);
- no unit is owned by two members that may act on it at one moment: of the live members
  whose ensure_generation(generation) passes, no two hold the same unit (views read twice
  and compared, so the answer is one instant's);
- a unit taken from a member (revoked) is handed to another member (on_assigned) only
  once the first acknowledged giving it up — joined a later generation without listing
  it as owned (KIP-429: the leader withholds a unit another member still reports owning,
  withhold_owned) — or can no longer act on it: it left or closed, or its session ended
  (its ensure_generation() refuses: the leader fences a departed holder for a session
  timeout). Checked on the receiving member's thread, at the moment it is handed the unit;
- a member handle's generations strictly increase, and the record's never go back;
- nothing is held after close() or leave(): no generation, no assignment,
  ensure_generation() refuses, and no on_join_complete reaches a closed handle.

Profiles (tests/conftest.py): ``ci`` (default) and ``thorough`` (10,000 examples):
``pytest --hypothesis-profile=thorough tests/group_coordinator/test_state_machine_member.py``.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import kubecoord
from kubecoord import CoordinationError, StaleGenerationError
from kubecoord.api import GroupCoordinatorHandle
from kubecoord.backends.memory.coordinator import MemoryCoordinator
from kubecoord.errors import RebalanceInProgressError
from kubecoord.group_coordinator import UnitsProtocol
from kubecoord.testing import ManualClock, crash, forget

GROUP = "workers"
UNITS = [f"u{i}" for i in range(6)]
SESSION_TIMEOUT = 3.0
REBALANCE_TIMEOUT = 5.0
PROCESSES = 3

processes = st.sampled_from(range(PROCESSES))


class RecordingUnits(UnitsProtocol):
    """UnitsProtocol that tells the machine of every assignment it completes, of every unit
    handed to it (on_assigned) and of what it reports owning when it joins a generation
    (metadata()): the units it has not yet acknowledged giving up."""

    def __init__(self, machine: MemberMachine, key: str) -> None:
        super().__init__(UNITS, assignors=(machine.assignor,), on_assigned=self._assigned)
        self._machine = machine
        self.key = key
        self.member: GroupCoordinatorHandle | None = None
        self.unacknowledged: frozenset[str] = frozenset()
        """Units handed to this handle that it has not reported giving up: each stays here
        until a metadata() (its join of a later generation) no longer lists it as owned."""

    def on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        super().on_join_complete(generation, member_id, protocol, assignment)
        self._machine.completed(self.key, generation, frozenset(self.units_of(assignment)))

    def metadata(self) -> list[tuple[str, bytes]]:
        with self._machine._lock:
            self.unacknowledged = frozenset(self.owned)
        return super().metadata()

    def _assigned(self, units: list[str]) -> None:
        self._machine.handed(self, frozenset(units))

    def may_act(self) -> bool:
        """This handle's own word that it may still work on its units (its session has not ended)."""
        member = self.member
        if member is None:
            return False
        try:
            member.ensure_generation(member.generation)
        except (StaleGenerationError, RebalanceInProgressError):
            return False
        return True


class Process:
    """One process: its coordinator and its current member handle (reopened after close)."""

    def __init__(self, index: int, incarnation: int, machine: MemberMachine) -> None:
        self.id = f"p{index}-{incarnation}"
        coord = kubecoord.connect(machine.url, clock=machine.clock, lease_duration=SESSION_TIMEOUT)
        assert isinstance(coord, MemoryCoordinator)
        self.coord = coord
        self.machine = machine
        self.handles = 0
        self.leaves = 0
        self.joined = False
        self.member, self.protocol = self.open()

    def open(self) -> tuple[GroupCoordinatorHandle, RecordingUnits]:
        self.handles += 1
        protocol = RecordingUnits(self.machine, f"{self.id}#{self.handles}")
        member = self.coord.group_coordinator(
            GROUP, protocol, member_id=self.id, session_timeout=SESSION_TIMEOUT, rebalance_timeout=REBALANCE_TIMEOUT,
        )
        protocol.member = member
        with self.machine._lock:
            self.machine.handles.append(protocol)
        return member, protocol

    def units(self) -> frozenset[str]:
        assignment = self.member.assignment
        return frozenset(self.protocol.units_of(assignment)) if assignment else frozenset()

    def may_act(self) -> bool:
        """The member's own word that it may work on its units now."""
        return self.protocol.may_act()


class MemberMachine(RuleBasedStateMachine):
    assignor = "sticky"

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.url = f"memory://members-{uuid.uuid4().hex[:8]}"
        reader = kubecoord.connect(self.url, clock=self.clock, lease_duration=SESSION_TIMEOUT)
        assert isinstance(reader, MemoryCoordinator)
        self.reader = reader
        self._lock = threading.Lock()
        self.violations: list[str] = []
        self.handles: list[RecordingUnits] = []  # every member handle's protocol, closed and crashed ones too
        self.owners: dict[tuple[int, str], str] = {}  # (generation, unit) -> handle key
        self.generations: dict[str, list[int]] = {}  # handle key -> completed generations
        self.closed: set[str] = set()  # handle keys whose close() or leave() returned
        self.record_generation = -1
        self.incarnations = [0] * PROCESSES
        self.processes = [Process(i, 0, self) for i in range(PROCESSES)]
        self.gone: list[Process] = []
        self.completions = 0

    def teardown(self) -> None:
        event(f"assignments completed: {min(self.completions, 10)}")
        for process in self.processes + self.gone:
            if not process.coord.crashed:
                process.coord.close()
        self.reader.close()
        forget(self.url)  # a URL per example: kept, 10,000 examples' states held 3.5 GB

    # -- what members report (on their worker threads) -----------------------------------
    def completed(self, key: str, generation: int, units: frozenset[str]) -> None:
        with self._lock:
            self.completions += 1
            if key in self.closed:
                self.violations.append(f"{key}: assigned generation {generation} after close/leave")
            previous = self.generations.setdefault(key, [])
            if previous and generation <= previous[-1]:
                self.violations.append(f"{key}: generation {generation} after {previous[-1]}")
            previous.append(generation)
            for unit in units:
                owner = self.owners.setdefault((generation, unit), key)
                if owner != key:
                    self.violations.append(f"generation {generation}: {unit} assigned to {owner} and {key}")

    def handed(self, protocol: RecordingUnits, units: frozenset[str]) -> None:
        """``protocol``'s handle was handed ``units`` (on_assigned): no other handle may still
        act on one of them unless it acknowledged giving it up (metadata() no longer lists it)
        — or its session ended, which its own ensure_generation() tells."""
        with self._lock:
            protocol.unacknowledged |= units
            others = [(other, other.unacknowledged & units) for other in self.handles
                      if other is not protocol and other.unacknowledged & units]
        for other, shared in others:
            if other.may_act():
                with self._lock:
                    self.violations.append(
                        f"{sorted(shared)} handed to {protocol.key} before {other.key}, which may still act, "
                        "acknowledged giving them up")

    # -- helpers ---------------------------------------------------------------------------
    def _live(self) -> list[Process]:
        return [p for p in self.processes if not p.coord.crashed]

    def quiesce(self) -> None:
        """Until every listener delivery is done and every member's worker thread waits for
        a wake with none pending: nothing moves until the next rule (the clock is manual)."""
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            for coord in [self.reader, *(p.coord for p in self._live())]:
                coord.context.dispatcher.flush(10.0)
            if _workers_idle():
                return
            time.sleep(0.001)
        raise AssertionError("the members' threads never went idle")

    def _ended(self, process: Process) -> None:
        """What a member holds once close() or leave() returned: nothing."""
        member = process.member
        assert member.assignment is None and member.generation == -1, (process.id, member.generation)
        assert not member.is_stable()
        try:
            member.ensure_generation(member.generation)
        except StaleGenerationError:
            pass
        else:
            raise AssertionError(f"{process.id}: ensure_generation() passed after close/leave")

    # -- rules -----------------------------------------------------------------------------
    @initialize(count=st.integers(min_value=1, max_value=PROCESSES))
    def first_members(self, count: int) -> None:
        """Every run starts with a group (runs that never formed one would test little)."""
        for i in range(count):
            self.join(i)

    @rule(i=processes)
    def join(self, i: int) -> None:
        process = self.processes[i]
        if process.joined:
            return
        try:
            process.member.join()
        except CoordinationError as exc:
            event(f"join refused: {type(exc).__name__}")
            return
        finally:
            self.quiesce()
        process.joined = True

    @rule(i=processes)
    def leave(self, i: int) -> None:
        process = self.processes[i]
        process.member.leave()
        with self._lock:
            self.closed.add(process.protocol.key)
            process.leaves += 1  # a later join() of this handle starts afresh, under a new key
            process.protocol.key = f"{process.id}#{process.handles}.{process.leaves}"
        process.joined = False
        self._ended(process)
        self.quiesce()

    @rule(i=processes)
    def close(self, i: int) -> None:
        process = self.processes[i]
        process.member.close()
        with self._lock:
            self.closed.add(process.protocol.key)
        self._ended(process)
        process.joined = False
        process.member, process.protocol = process.open()
        self.quiesce()

    @rule(i=processes)
    def crash_and_restart(self, i: int) -> None:
        """kill -9 of process i: its member expires a session later; a new process takes its place."""
        process = self.processes[i]
        crash(process.coord)
        self.gone.append(process)
        self.incarnations[i] += 1
        self.processes[i] = Process(i, self.incarnations[i], self)
        self.quiesce()

    @rule(i=processes)
    def request_rejoin(self, i: int) -> None:
        process = self.processes[i]
        if not process.joined:
            return
        try:
            process.member.request_rejoin()
        except CoordinationError as exc:
            event(f"request_rejoin refused: {type(exc).__name__}")
        self.quiesce()

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 3.0, 4.0, 6.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.quiesce()

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def nothing_reported_wrong(self) -> None:
        with self._lock:
            assert not self.violations, self.violations

    @invariant()
    def no_unit_owned_twice_by_members_that_may_act(self) -> None:
        for _ in range(50):
            first = self._views()
            if first == self._views():
                break
        else:
            event("views kept changing")
            return
        acting = [(member, units) for member, _, units, may_act in first if may_act]
        for index, (member, units) in enumerate(acting):
            for other, others in acting[index + 1:]:
                assert not units & others, f"{member} and {other} both may act on {sorted(units & others)}"

    @invariant()
    def the_record_never_goes_back(self) -> None:
        # The members' generations first, then the record: a member's generation came from
        # a record at least that new, so a record read after it holds at least as much
        # even if the group moved on between the reads.
        members = [(process.id, process.member.generation) for process in self._live()]
        description = self.reader.describe_group(GROUP)
        generation = -1 if description is None else description.generation
        assert generation >= self.record_generation, (generation, self.record_generation)
        self.record_generation = generation
        for member, member_generation in members:
            assert member_generation <= generation, (member, member_generation, generation)

    def _views(self) -> list[tuple[str, int, frozenset[str], bool]]:
        return [(p.id, p.member.generation, p.units(), p.may_act()) for p in self._live()]


class CooperativeMemberMachine(MemberMachine):
    assignor = "cooperative-sticky"


def _workers_idle() -> bool:
    """Every group member's worker thread is blocked waiting for a wake that has not come."""
    frames = sys._current_frames()
    for thread in threading.enumerate():
        if not thread.name.startswith(f"kubecoord-group-{GROUP}") or thread.ident is None:
            continue
        frame: Any = frames.get(thread.ident)
        waiting = False
        while frame is not None:
            if frame.f_code.co_name == "wait" and isinstance(frame.f_locals.get("self"), threading.Event):
                caller = frame.f_back
                waiting = (caller is not None and caller.f_code.co_name == "_run"
                           and not frame.f_locals["self"].is_set())
                break
            frame = frame.f_back
        if not waiting:
            return False
    return True


TestMemberMachine = MemberMachine.TestCase
TestCooperativeMemberMachine = CooperativeMemberMachine.TestCase
