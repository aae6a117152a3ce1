"""The lease elector as a Hypothesis state machine: three candidates (and restarts of them)
over one scripted record table, on a manual clock. Any step, watch delivery (the latest
version, or an older one delivered late), release, crash or clock jump may come next, and
any store call of a step may fail, lose its answer, or be slow or late in transit.

After every step:

- never two leaders: no two electors answer is_leader() True at the same clock instant;
- a leader's own view never exceeds what the store proves: the table's record names it,
  at the epoch it reports;
- epochs strictly increase: every acquisition reports an epoch above every earlier one,
  and the table's transitions never go back;
- nothing held after release or crash: a retired elector never leads and never writes;
- fenced writes: a write to memory:// storage fenced with a candidate's last epoch is
  refused exactly when a higher epoch was accepted before, and never refused while that
  candidate leads.

Profiles (tests/conftest.py): ``ci`` (default, derandomized, short) and ``thorough``
(10,000 examples): ``pytest --hypothesis-profile=thorough tests/_core/test_state_machine_elector.py``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import kubecoord
from kubecoord import Fence
from kubecoord._core.lease import Elector, LeaderRecord, Timings
from kubecoord._internal.clock import ManualClock
from kubecoord.backends.memory.records import RecordTable, TableView

from ..helpers import Fault, FencedWrites, NoMetrics, ScriptedTable, elector

NAME = "elections/billing"
TIMINGS = Timings(lease_duration=3.0, renew_deadline=2.0, retry_period=1.0)
CANDIDATES = ("a", "b", "c")


class LateWatch(TableView):
    """A view whose watch can deliver an older version late (reordered events)."""

    def deliver_version(self, record: LeaderRecord, version: int) -> None:
        self._observe(record, version)


faults = st.lists(
    st.one_of(
        st.just(Fault()),
        st.just(Fault("fail")),
        st.just(Fault("lost")),
        st.builds(Fault, st.sampled_from(["slow", "late"]), st.sampled_from([0.1, 0.5, 1.0, 1.5, 2.5])),
    ),
    max_size=3,
)
candidates = st.sampled_from(range(len(CANDIDATES)))


class Participant:
    def __init__(self, name: str, machine: ElectorMachine) -> None:
        self.name = name
        self.view = LateWatch(machine.table, NAME, machine.clock)
        self.view.deliver()
        self.elector = elector(name, self.view, machine.clock, TIMINGS, service="billing", on_change=machine.on_change,
                               metrics=NoMetrics(), wall=lambda: machine.clock.now(), request_timeout=1.0)
        self.retired_at: int | None = None  # len(table.applied) when first released or crashed
        self.last_epoch: int | None = None  # what this process would fence its writes with


class ElectorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.table = ScriptedTable(advance=self.clock.advance)
        self.acquisitions: list[tuple[str, int]] = []
        self.participants = [Participant(name, self) for name in CANDIDATES]
        self.coord = kubecoord.connect("memory://")
        self.storage = self.coord.storage("guarded")
        self.storage.put("k", "0")
        self.fenced = FencedWrites()

    def teardown(self) -> None:
        event(f"acquisitions: {min(len(self.acquisitions), 5)}{'+' if len(self.acquisitions) > 5 else ''}")
        self.coord.close()

    def on_change(self, elector: Elector, leading: bool) -> None:
        if leading:
            assert elector.epoch is not None
            self.acquisitions.append((elector.candidate, elector.epoch))
            for participant in self.participants:
                if participant.elector is elector:
                    participant.last_epoch = elector.epoch

    def _call(self, participant: Participant, script: list[Fault], action: Any) -> Any:
        self.table.caller = participant.name
        self.table.script = list(script)
        try:
            return action()
        finally:
            self.table.script = []
            self.table.caller = ""

    # -- rules ---------------------------------------------------------------------------
    @initialize(script=faults)
    def first_step(self, script: list[Fault]) -> None:
        """Every run starts with a step of ``a`` (most elect it), whatever comes next."""
        self.step(0, script)

    @rule(i=candidates, script=faults)
    def step(self, i: int, script: list[Fault]) -> None:
        participant = self.participants[i]
        self._call(participant, script, participant.elector.step)

    @rule(seconds=st.sampled_from([0.05, 0.5, 1.0, 1.5, 2.0, 3.0, 3.5]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(i=candidates)
    def deliver(self, i: int) -> None:
        self.participants[i].view.deliver()

    @rule(i=candidates, back=st.integers(min_value=1, max_value=4))
    def deliver_late(self, i: int, back: int) -> None:
        history = self.table.history(NAME)
        if history:
            record, version = history[max(0, len(history) - 1 - back)]
            self.participants[i].view.deliver_version(record, version)

    @rule(i=candidates, script=faults)
    def release(self, i: int, script: list[Fault]) -> None:
        participant = self.participants[i]
        if participant.retired_at is None:
            participant.retired_at = len(self.table.applied)
        self._call(participant, script, participant.elector.release)

    @rule(i=candidates)
    def crash(self, i: int) -> None:
        participant = self.participants[i]
        participant.elector.abandon()
        if participant.retired_at is None:
            participant.retired_at = len(self.table.applied)

    @precondition(lambda self: any(p.retired_at is not None for p in self.participants))
    @rule(i=candidates)
    def restart(self, i: int) -> None:
        """A released or crashed candidate's process starts again under the same id."""
        old = self.participants[i]
        if old.retired_at is not None:
            self.participants[i] = Participant(old.name, self)

    @rule(i=candidates, op=st.sampled_from(["put", "update", "delete"]))
    def fenced_write(self, i: int, op: str) -> None:
        participant = self.participants[i]
        token = participant.last_epoch
        if token is None:
            return
        self.fenced.write(self.storage, op, participant.name, Fence("billing", token),
                          holding=participant.elector.is_leader())

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def at_most_one_leader(self) -> None:
        leaders = [p.name for p in self.participants if p.elector.is_leader()]
        assert len(leaders) <= 1, f"two leaders at {self.clock.now()}: {leaders}"

    @invariant()
    def leaders_view_is_what_the_store_holds(self) -> None:
        current = RecordTable.read(self.table, NAME)  # the store itself, past the script
        for participant in self.participants:
            if participant.elector.is_leader():
                assert current is not None
                record, _ = current
                assert record.holder == participant.name, f"{participant.name} leads; the store names {record.holder!r}"
                assert record.transitions == participant.elector.epoch

    @invariant()
    def epochs_strictly_increase(self) -> None:
        epochs = [epoch for _, epoch in self.acquisitions]
        assert epochs == sorted(set(epochs)), f"acquisitions: {self.acquisitions}"
        written = [record.transitions for _, _, record, _ in self.table.applied]
        assert written == sorted(written), f"transitions written: {written}"

    @invariant()
    def nothing_held_after_release_or_crash(self) -> None:
        for participant in self.participants:
            if participant.retired_at is None:
                continue
            assert not participant.elector.is_leader()
            # Only releases (an empty holder) may follow: a failed release is tried again.
            later = [
                record for caller, _, record, _ in self.table.applied[participant.retired_at:]
                if caller == participant.name and record.held
            ]
            assert not later, f"{participant.name} wrote {later} after it was released or crashed"


TestElectorMachine = ElectorMachine.TestCase
