"""LeaderElection on memory://: the lease core's election handle over the state's record table.

Each nominated candidate runs kubecoord._core.lease's Elector over a TableView of the
record named after the service, with the coordinator's lease timings or the handle's own
(leader_election(service, lease_duration=..., renew_deadline=..., retry_period=...)).
Every write to the record is delivered to every handle watching it at once (the table's
subscribers): followers step right away when they can take the step lock, so a release
hands over before the writer's call returns; otherwise their loop is woken. Under a manual
clock the state walks the clock's jumps (state.LeaseClock) and no elector has a thread of
its own. Listeners: see kubecoord._core.lease.election.
"""

from __future__ import annotations

from kubecoord._core.lease import Observation
from kubecoord._core.lease.election import Candidate, LeaseElection
from kubecoord.backends.memory.context import MemoryContext
from kubecoord.backends.memory.records import TableView
from kubecoord.timings import Timings


class MemoryLeaderElection(LeaseElection):
    # The memory history keeps the events it always had: no "observed".
    log_observed = False
    heartbeat_on_crash = True

    def __init__(self, context: MemoryContext, service: str, timings: Timings) -> None:
        state = context.state
        super().__init__(context, service, context.events, timings=timings, clock=state.lease_clock, wall=state.wall)
        self._context = context
        self._state = state
        self._record_name = f"elections/{service}"
        self._observer = self._new_view()
        self._observer.deliver()
        with self._lock:
            self._reported = self._leader_seen()[0]
        self._state.records.subscribe(self._record_name, self._on_write)

    def _new_view(self) -> TableView:
        return TableView(self._state.records, self._record_name, self._state.lease_clock)

    # -- lease core hooks ---------------------------------------------------------------
    def _store(self, candidate_id: str) -> TableView:
        view = self._new_view()
        view.deliver()
        return view

    def _view(self, *, start: bool) -> Observation | None:
        return self._observer.deliver()

    def _notify(self, leader: str | None) -> None:
        self._context.deliver(self._listeners, leader)

    def _threaded(self) -> bool:
        return not self._state.manual

    def _started(self, candidate: Candidate) -> None:
        self._state.add_runner(candidate)

    def _withdrawn(self, candidate: Candidate) -> None:
        self._state.remove_runner(candidate)

    def _stopped(self) -> bool:
        return self._context.crashed

    def _on_write(self) -> None:
        """The table's watch: every view observes the new version, candidates step."""
        self._observer.deliver()
        with self._lock:
            candidates = list(self._candidates.values())
        for candidate in candidates:
            assert isinstance(candidate.store, TableView)
            candidate.store.deliver()
        self._changed(step=True)

    # -- lifecycle ----------------------------------------------------------------------
    def _stop_observing(self) -> None:
        self._state.records.unsubscribe(self._record_name, self._on_write)

    def crash(self) -> None:
        """Stop as kill -9 would: a last heartbeat, then no release and no more steps."""
        self._stop_observing()
        self._withdraw_all(release=False)
        self._closed = True
