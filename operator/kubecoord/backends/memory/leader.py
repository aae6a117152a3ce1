"""LeaderElection on memory://: the lease core's Elector over the state's record table.

Each nominated candidate runs kubecoord._core.lease.Elector over a TableView of the
record named after the service, with the coordinator's lease timings (session_timeout is
the lease duration). Every write to the record is delivered to every handle watching it
at once (the table's subscribers): followers step right away when they can take the step
lock, so a release hands over before the writer's call returns; otherwise their loop is
woken. Under a manual clock the state walks the clock's jumps (state.LeaseClock) and no
elector has a thread of its own.

Listeners get the leader as this handle sees it: one of its own candidates while its
renew deadline holds, else the record's holder — except that a holder which is one of
this handle's own candidates but no longer leads in its own view reads as None.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from kubecoord._core.handles import ElectionHandle
from kubecoord._core.lease import Elector, Loop, Timings, expires_at
from kubecoord._internal.clock import Clock
from kubecoord.api import Leader
from kubecoord.backends.memory.handle import MemoryHandle
from kubecoord.backends.memory.records import TableView
from kubecoord.errors import MemberExistsError

if TYPE_CHECKING:
    from kubecoord.backends.memory.coordinator import MemoryCoordinator

_MAX_IMMEDIATE_STEPS = 3


class Candidate:
    """One nominated candidate: its elector, its view of the record, its loop (if any)
    and when it is next due (what the manual-clock walk reads)."""

    def __init__(self, elector: Elector, view: TableView, timings: Timings, clock: Clock) -> None:
        self.elector = elector
        self.view = view
        self.loop: Loop | None = None
        self.due = 0.0
        self._timings = timings
        self._clock = clock

    def run(self) -> float:
        """Step until the elector asks for a pause (it asks for 0 after a lost race). Call
        with the elector's step lock held."""
        delay = 0.0
        for _ in range(_MAX_IMMEDIATE_STEPS):
            delay = self.elector.step()
            if delay > 0:
                break
        else:
            delay = self._timings.retry_period
        self.due = self._clock.now() + delay
        return delay

    def step_now(self) -> None:
        with self.elector.step_lock:
            self.run()

    def poke(self) -> None:
        """A new version was delivered: step now if nobody is stepping, else wake the loop."""
        if self.elector.step_lock.acquire(blocking=False):
            try:
                self.run()
            finally:
                self.elector.step_lock.release()
        elif self.loop is not None:
            self.loop.wake()


class MemoryLeaderElection(MemoryHandle, ElectionHandle):
    def __init__(self, coordinator: MemoryCoordinator, service: str) -> None:
        super().__init__(coordinator, service)
        self.service = service
        self.timings = coordinator.timings
        self._record_name = f"elections/{service}"
        self._lock = threading.Lock()  # candidates and the reported leader; a leaf lock
        self._candidates: dict[str, Candidate] = {}
        self._observer = TableView(self._state.records, self._record_name, self._state.lease_clock)
        self._observer.deliver()
        self._reported: str | None = self._current()
        self._state.records.subscribe(self._record_name, self._on_write)

    # -- the watch ----------------------------------------------------------------------
    def _on_write(self) -> None:
        self._observer.deliver()
        with self._lock:
            candidates = list(self._candidates.values())
        for candidate in candidates:
            candidate.view.deliver()
            candidate.poke()
        self._report()

    def _on_elector_change(self, elector: Elector, leading: bool) -> None:
        self._report()

    def _current(self) -> str | None:
        leading = [c for c, s in self._candidates.items() if s.elector.is_leader()]
        if leading:
            return leading[0]
        current = self._state.records.read(self._record_name)
        holder = current[0].holder if current is not None else ""
        return None if not holder or holder in self._candidates else holder

    def _report(self) -> None:
        """Tell listeners when the leader as this handle sees it changed (module docstring)."""
        with self._lock:
            if self._closed:
                return
            current = self._current()
            if current == self._reported:
                return
            self._reported = current
        self._coordinator.deliver(self._listeners, current)

    # -- the interface ------------------------------------------------------------------
    def _nominate(self, candidate_id: str, data: str) -> bool:
        with self._lock:
            if candidate_id in self._candidates:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
        view = TableView(self._state.records, self._record_name, self._state.lease_clock)
        view.deliver()
        elector = Elector(
            service=self.service, candidate=candidate_id, data=data, store=view, timings=self.timings,
            clock=self._state.lease_clock, on_change=self._on_elector_change, events=self._events,
            backend="memory", wall=self._state.wall,
        )
        candidate = Candidate(elector, view, self.timings, self._state.lease_clock)
        if not self._state.manual:
            candidate.loop = Loop(
                f"kubecoord-memory-elector-{self.service}-{candidate_id}", candidate.run, lock=elector.step_lock
            )
        with self._lock:
            if candidate_id in self._candidates:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
            self._candidates[candidate_id] = candidate
        candidate.step_now()  # the first attempt in the caller's thread: nominate() answers it
        self._state.add_runner(candidate)
        if candidate.loop is not None:
            candidate.loop.start()
        self._report()
        return elector.is_leader()

    def _get_leader(self) -> Leader | None:
        current = self._state.records.read(self._record_name)
        if current is None or not current[0].holder:
            return None
        record = current[0]
        with self._lock:
            mine = self._candidates.get(record.holder)
        if mine is not None:
            return Leader(record.holder, record.data, record.transitions) if mine.elector.is_leader() else None
        seen = self._observer.deliver()
        if seen is not None and self._state.lease_clock.now() >= expires_at(seen):
            return None  # expired in our own observation; whoever takes over will show up
        return Leader(record.holder, record.data, record.transitions)

    def _resign(self, candidate_id: str) -> None:
        with self._lock:
            candidate = self._candidates.get(candidate_id)
        if candidate is None or not candidate.elector.is_leader():
            return
        self._withdraw(candidate_id)
        self._report()

    def _withdraw(self, candidate_id: str, *, release: bool = True) -> None:
        with self._lock:
            candidate = self._candidates.pop(candidate_id, None)
        if candidate is None:
            return
        self._state.remove_runner(candidate)
        if candidate.loop is not None:
            candidate.loop.stop()
        with candidate.elector.step_lock:
            if release:
                candidate.elector.release()
            else:
                candidate.elector.renew_now()  # the heartbeat a process logs just before kill -9
                candidate.elector.abandon()

    def is_leader(self, candidate_id: str | None = None) -> bool:
        if self._closed or self._coordinator.crashed:
            return False
        with self._lock:
            candidates = list(self._candidates.items())
        return any(s.elector.is_leader() for c, s in candidates if candidate_id is None or c == candidate_id)

    def close(self) -> None:
        if self._closed:
            return
        for candidate_id in list(self._candidates):
            self._withdraw(candidate_id)
        self._report()
        self._state.records.unsubscribe(self._record_name, self._on_write)
        super().close()

    def crash(self) -> None:
        """Stop as kill -9 would: a last heartbeat, then no release and no more steps."""
        self._state.records.unsubscribe(self._record_name, self._on_write)
        for candidate_id in list(self._candidates):
            self._withdraw(candidate_id, release=False)
        super().close()
