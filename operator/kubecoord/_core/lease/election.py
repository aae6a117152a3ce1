"""The LeaderElection handle over the lease core, shared by kubernetes:// and memory://.

Each nominated candidate runs an Elector over a record store the backend supplies
(``_store``), on a Loop of its own (``_threaded``: the process's shared scheduler steps
it) or stepped by the backend. The backend
also supplies this handle's own view of the record (``_view``) and calls ``_changed()``
when its watch delivers a new version.

A nominate() that raises leaves no candidate on the handle (nominating again is not
refused); a write its first attempt may have made (an answer that never came) is
abandoned as after a crash: the record expires after its lease.

Listeners get the leader as this handle sees it: one of its own candidates while its
renew deadline holds, else the record's holder — except that a holder which is one of
this handle's own candidates but no longer leads in its own view reads as None (the
holder knows first that it lost). get_leader() also reads a holder whose record expired
in this handle's observation as None. Not guaranteed: a listener call when a record
merely expires with no candidate left to take it.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from kubecoord._core.handles import ElectionHandle, Owner
from kubecoord._core.lease.elector import Elector
from kubecoord._core.lease.loop import Loop
from kubecoord._core.lease.store import RecordStore
from kubecoord._internal.clock import Clock
from kubecoord.api import Leader
from kubecoord.errors import MemberExistsError
from kubecoord.history import EventLog
from kubecoord.timings import DEFAULT_REQUEST_TIMEOUT, Timings
from kubecoord.wire.events import Event
from kubecoord.wire.leader_record import Observation, expires_at

_UNSET: Any = object()


def observed_leader(seen: Observation | None, now: float) -> Leader | None:
    """The leader an observer with no candidate of its own reads from ``seen`` at ``now``
    (its own clock): the record's holder, None when there is none or when the record
    expired in this observation (whoever takes over will show up)."""
    if seen is None or not seen.record.holder or now >= expires_at(seen):
        return None
    record = seen.record
    return Leader(record.holder, record.data, record.transitions)
_MAX_IMMEDIATE_STEPS = 3


class Candidate:
    """One nominated candidate: its elector, its store, its Loop (if the shared scheduler steps it) and
    when it is next due (what a backend that steps electors itself reads)."""

    def __init__(self, elector: Elector, store: RecordStore, timings: Timings, clock: Clock) -> None:
        self.elector = elector
        self.store = store
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

    def _run_and_reschedule(self) -> None:
        """run() outside the Loop: its schedule is then the step's, not the Loop's last one
        (a poke that acquired must renew within the renew deadline; the Loop may have been
        set to wake at the lease's expiry, seconds later)."""
        delay = self.run()
        if self.loop is not None:
            self.loop.reschedule(delay)

    def step_now(self) -> None:
        with self.elector.step_lock:
            self._run_and_reschedule()

    def poke(self) -> None:
        """A new version was delivered: step now if nobody is stepping, else wake the loop."""
        if self.elector.step_lock.acquire(blocking=False):
            try:
                self._run_and_reschedule()
            finally:
                self.elector.step_lock.release()
        elif self.loop is not None:
            self.loop.wake()


class LeaseElection(ElectionHandle):
    """A LeaderElection whose candidates run the lease core; backends implement the hooks."""

    log_observed: ClassVar[bool] = True
    """Record an ``observed`` event when the leader this handle sees is somebody else's."""
    heartbeat_on_crash: ClassVar[bool] = False
    """crash(): renew once more before stopping (memory's simulate_crash), or just stop."""
    _creates_record: bool = True
    """Whether candidates create a missing record (False: its owner, an operator, does)."""

    def __init__(
        self,
        owner: Owner,
        service: str,
        events: EventLog,
        *,
        timings: Timings,
        clock: Clock,
        wall: Callable[[], float] = time.time,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        super().__init__(owner, service, events)
        self.timings = timings
        self._lease_clock = clock
        self._wall = wall
        self._request_timeout = request_timeout
        self._lock = threading.Lock()  # candidates and the reported leader; a leaf lock
        self._candidates: dict[str, Candidate] = {}
        self._reported: str | None = _UNSET

    # -- backend hooks ------------------------------------------------------------------
    @abc.abstractmethod
    def _store(self, candidate_id: str) -> RecordStore:
        """A record store for a new candidate (its own view of the record)."""

    @abc.abstractmethod
    def _view(self, *, start: bool) -> Observation | None:
        """This handle's latest observation of the record (``start``: start watching if needed)."""

    @abc.abstractmethod
    def _notify(self, leader: str | None) -> None:
        """Deliver ``leader`` to the listeners (the coordinator's dispatcher)."""

    def _threaded(self) -> bool:
        """Whether each candidate gets a Loop on the shared scheduler (else the backend steps them)."""
        return True

    def _check_store(self, store: RecordStore) -> None:
        """After a candidate's first step: raise what must fail nominate() (e.g. no namespace)."""

    def _started(self, candidate: Candidate) -> None:
        """A candidate was nominated and made its first step."""

    def _withdrawn(self, candidate: Candidate) -> None:
        """A candidate is being withdrawn (before its release or abandonment)."""

    def _stopped(self) -> bool:
        """True once the coordinator was closed or crashed: nobody leads through this handle."""
        return False

    # -- watching -----------------------------------------------------------------------
    def _changed(self, *, step: bool) -> None:
        """The watch delivered a new version: step the candidates now (``step``, for a
        backend whose writes are cheap) or wake their loops; then tell the listeners."""
        with self._lock:
            candidates = list(self._candidates.values())
        for candidate in candidates:
            if step:
                candidate.poke()
            elif candidate.loop is not None:
                candidate.loop.wake()
        self._report()

    def _on_elector_change(self, elector: Elector, leading: bool) -> None:
        self._report()

    def _report(self) -> None:
        """Tell listeners when the leader as this handle sees it changed (module docstring)."""
        with self._lock:
            if self._closed:
                return
            current, mine, epoch = self._leader_seen()
            if current == self._reported:
                return
            self._reported = current
            self._notify(current)
        if self.log_observed and current is not None and not mine:
            self._record(Event.OBSERVED, member=current, epoch=epoch)

    def _leader_seen(self) -> tuple[str | None, bool, int | None]:
        """(the leader as this handle sees it, whether it is one of ours, the record's epoch
        when it is not). Call with ``_lock`` held."""
        leading = [c for c, s in self._candidates.items() if s.elector.is_leader()]
        if leading:
            return leading[0], True, None
        seen = self._view(start=False)
        holder = seen.record.holder if seen is not None else ""
        current = None if not holder or holder in self._candidates else holder
        return current, False, seen.record.transitions if seen is not None else None

    # -- the interface ------------------------------------------------------------------
    def _nominate(self, candidate_id: str, data: str) -> bool:
        with self._lock:
            if candidate_id in self._candidates:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
        store = self._store(candidate_id)
        elector = Elector(
            service=self.service, candidate=candidate_id, data=data, store=store, timings=self.timings,
            clock=self._lease_clock, on_change=self._on_elector_change, events=self._history,
            backend=self._owner.backend, wall=self._wall, request_timeout=self._request_timeout,
            creates_record=self._creates_record,
        )
        candidate = Candidate(elector, store, self.timings, self._lease_clock)
        if self._threaded():
            candidate.loop = Loop(
                f"kubecoord-elector-{self.service}-{candidate_id}", candidate.run, lock=elector.step_lock
            )
        with self._lock:
            if candidate_id in self._candidates:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
            self._candidates[candidate_id] = candidate
        try:
            candidate.step_now()  # the first attempt in the caller's thread: nominate() answers it
            self._check_store(store)
        except BaseException:
            # Whatever nominate() raises (a refusal, a bug, a signal handler's exception in
            # the middle of a request), it leaves no candidate behind: nominating again works.
            # A write it may have made is left to expire, as after a crash.
            elector.abandon()
            with self._lock:
                if self._candidates.get(candidate_id) is candidate:
                    del self._candidates[candidate_id]
            raise
        with self._lock:
            if self._candidates.get(candidate_id) is not candidate:
                return False  # resigned while that first attempt was in flight
        self._started(candidate)
        if candidate.loop is not None:
            candidate.loop.start()
        self._report()
        return elector.is_leader()

    def _get_leader(self) -> Leader | None:
        seen = self._view(start=True)
        if seen is None or not seen.record.holder:
            return None
        record = seen.record
        with self._lock:
            mine = self._candidates.get(record.holder)
        if mine is not None:
            return Leader(record.holder, record.data, record.transitions) if mine.elector.is_leader() else None
        return observed_leader(seen, self._lease_clock.now())

    def _resign(self, candidate_id: str) -> None:
        with self._lock:
            candidate = self._candidates.get(candidate_id)
        if candidate is None:
            return
        # Judged between steps: an acquire in flight (its write applied, so watchers already
        # see this candidate lead, its answer not yet back) settles first. And a candidate
        # the record still names counts as leading (its renew deadline lapsed under load, or
        # the answer was lost): ignored, it would take the record back at expiry and lead on.
        with candidate.elector.step_lock:
            holds = candidate.elector.holds()
        if not holds:
            return
        self._withdraw(candidate_id)
        self._report()

    def _withdraw(self, candidate_id: str, *, release: bool = True) -> None:
        with self._lock:
            candidate = self._candidates.get(candidate_id)
        if candidate is None:
            return
        self._withdrawn(candidate)
        if candidate.loop is not None:
            candidate.loop.stop()
        with candidate.elector.step_lock:
            if release:
                candidate.elector.release()
            else:
                if self.heartbeat_on_crash:
                    candidate.elector.renew_now()  # the heartbeat a process logs just before kill -9
                candidate.elector.abandon()
        with self._lock:
            self._candidates.pop(candidate_id, None)

    def is_leader(self, candidate_id: str | None = None) -> bool:
        if self._closed or self._stopped():
            return False
        with self._lock:
            candidates = list(self._candidates.items())
        return any(s.elector.is_leader() for c, s in candidates if candidate_id is None or c == candidate_id)

    def leading_until(self, candidate_id: str | None = None) -> float | None:
        if self._closed or self._stopped():
            return None
        with self._lock:
            candidates = list(self._candidates.items())
        untils = [s.elector.leading_until() for c, s in candidates if candidate_id is None or c == candidate_id]
        return max((until for until in untils if until is not None), default=None)

    def close(self) -> None:
        """Resign every candidacy (release), report the last leader, then stop observing."""
        if self._closed:
            return
        self._withdraw_all(release=True)
        self._report()
        super().close()
        self._stop_observing()

    def _stop_observing(self) -> None:
        """Stop the backend's watch or poll of the record (after close() and crash())."""

    def _withdraw_all(self, *, release: bool) -> None:
        for candidate_id in list(self._candidates):
            self._withdraw(candidate_id, release=release)
