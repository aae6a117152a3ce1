"""The lease election loop, client-go style, over a small record store.

Usage (what the Kubernetes and memory LeaderElection handles do for each nominated candidate)::

    elector = Elector(service="billing", candidate="pod-a", data="", store=lease_store,
                      timings=Timings(15, 10, 2), clock=MonotonicClock(), on_change=wake,
                      backend="kubernetes")
    delay = elector.step()           # acquire or renew once; returns when to call again
    elector.is_leader()              # the holder's own view, from its renew deadline
    elector.release()                # write an empty holder (client-go's release)

The loop is written once over RecordStore (get the observed record, create, update with
compare-and-set) so it can be tested step by step against the memory backend's record
table and a manual clock. The backend's name labels the metrics and the metrics sink is
passed in (kubecoord.metrics by default).

Guarantees:

- Safety rests on compare-and-set: a candidate writes a record only over the version it
  observed; a 409 means re-read, never overwrite. Two holders can never both write.
- A follower takes over when the record has no holder (a release), or when the version it
  observed has not changed for the record's leaseDurationSeconds, measured on this
  process's monotonic clock from the moment it observed that version — never by comparing
  renewTime with the local wall clock.
- A leader is valid until ``renew_deadline`` after it *sent* its last successful write.
  Followers start their lease_duration at least as late as the server applied that write,
  and renew_deadline < lease_duration, so a leader knows it lost before anybody can take
  over (given clocks that tick at similar rates). When the deadline passes, step() reports
  the loss and does not write again as leader; is_leader() turns False at that instant
  by itself — a process resumed after SIGSTOP sees False before any thread runs a write.
- The epoch is the record's transitions: higher on every acquisition (kubecoord also counts
  a re-acquisition by the same id after a loss as a new term). Epochs strictly increase
  across holders, processes and restarts, whatever is done to the record by hand, because
  of the store's high-water mark (RecordStore.read_mark/write_mark: a second object,
  written only by compare-and-set; on Kubernetes the Lease ``NAME.epoch``). A candidate
  writes the record one above both the mark and the highest epoch it saw on the record,
  then raises the mark to that epoch, from below, before it counts as leading: a record
  edited down, deleted, or re-created by someone else at 0 never makes an epoch issued
  again, and of two candidates that wrote the same epoch (the record deleted between
  them) only the one whose write took the mark past it leads. Epochs go up by one per
  term unless the record was edited or deleted.
- A record deleted behind the candidates' backs: a candidate that saw it, or that finds
  its mark without it, waits a whole lease from when it noticed (the last holder may still
  believe it leads until its renew deadline), then acquires above the mark. So does one
  that finds the record free but no release (6a): at an epoch below the mark (re-created,
  e.g. by ``kubectl apply`` of a Lease manifest: a release keeps its term's epoch), or
  without a release's shape (``is_release``: the holder cleared by hand, a record
  re-created at any epoch); only a record on which nothing was issued (epoch 0, no mark
  or a mark at 0) is taken at once without it. An elector
  made with ``creates_record=False`` (a Kubernetes election bound to an operator-managed
  LeaderElection) never creates the record nor the mark: while either is missing it waits
  (one log line) for the operator, which creates both and re-creates a deleted Lease as it
  was (holder, times and epoch from the watch's last view).
- Hand edits of a held record do not stick: the leader renews over them with its own
  lease duration (as client-go does; an edited 1 s would let followers take over while it
  leads) and never with an epoch below the one it holds (an edit of leaseTransitions down
  is written back up). A holder whose record was given to another holder, or re-created
  by someone else, learns it lost at its next renewal (a conflict), within its renew
  deadline; one whose record was just deleted puts it back with that renewal (a
  Kubernetes PUT creates a missing Lease, as client-go's renewal does) and keeps its
  epoch, while every other candidate waits a whole lease (5a).

- A release frees only a record of one of this elector's own terms (it names the
  candidate at an epoch no higher than any this elector wrote): a record under the same id
  at a higher epoch is another elector's (the next attempt of the same lock, a process
  restarted under the id), and resign() and release() leave it alone.

Not guaranteed: epochs above everything issued when both the record and its mark are
deleted or edited down (nothing else remembers them, except the candidates that saw them:
they acquire above their own highest); that the leader's work stops in time — use the
epoch as a fencing token.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from kubecoord import metrics as client_metrics
from kubecoord._core.lease.store import RecordConflict, RecordStore
from kubecoord._internal.clock import Clock, MonotonicClock
from kubecoord.errors import CoordinationError
from kubecoord.history import EventLog
from kubecoord.timings import DEFAULT_REQUEST_TIMEOUT, Timings
from kubecoord.wire.events import Event, Primitive
from kubecoord.wire.leader_record import LeaderRecord, Observation, expires_at, from_unix, is_release, released

log = logging.getLogger("kubecoord.lease.elector")

LOSS_REASONS = {
    "deadline": "renew deadline passed",
    "taken": "the record was taken by another holder",
    "conflict": "renew conflict: the record changed under us",
    "answered_late": "the renewal was answered after the renew deadline",
    "acquired_late": "the acquisition was answered after the renew deadline",
}
"""Why a leader steps down: the ``reason`` field of its one WARNING line (and its text)."""


class LeaseMetrics(Protocol):
    """Where the elector reports (kubecoord.metrics has these functions)."""

    def leadership(self, backend: str, service: str, candidate: str, leading: bool) -> None: ...

    def renewed(self, backend: str, seconds: float) -> None: ...


class Elector:
    """One candidate's acquire/renew state machine. step() is not thread-safe by itself:
    the owner calls it from one thread (or holds ``step_lock``)."""

    def __init__(
        self,
        *,
        service: str,
        candidate: str,
        data: str,
        store: RecordStore,
        timings: Timings,
        clock: Clock,
        on_change: Callable[[Elector, bool], None],
        events: EventLog | None = None,
        backend: str,
        metrics: LeaseMetrics = client_metrics,
        wall: Callable[[], float] = time.time,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        creates_record: bool = True,
    ) -> None:
        self.service = service
        self.candidate = candidate
        self.data = data
        self.step_lock = threading.Lock()
        self._store = store
        self._timings = timings
        self._clock = clock
        self._on_change = on_change
        self._events = events or EventLog()
        self._wall = wall
        self._request_timeout = request_timeout
        self._backend = backend
        self._metrics = metrics
        self._leading = False
        self._valid_until = 0.0
        self._next_renew = 0.0
        self._version = ""
        self._record: LeaderRecord | None = None
        self._sent = 0.0
        self._highest_epoch = 0
        self._own_epoch = 0
        """The highest epoch this elector wrote or sent a write for: a record naming its id
        above that is another elector's term under the same id, never this one's."""
        self._vanished_at: float | None = None
        self._mark_read: tuple[int, str | None] | None = None
        """The mark as read during the current step (one GET serves both of its uses)."""
        self._creates_record = creates_record
        self._missing: set[str] = set()
        """What only the record's owner creates and this elector found missing (warned once)."""
        self._retired = False

    # -- the holder's own view ----------------------------------------------------------
    def is_leader(self) -> bool:
        return self._leading and self._clock.now() < self._valid_until

    @property
    def epoch(self) -> int | None:
        return self._record.transitions if self._leading and self._record else None

    @property
    def valid_until(self) -> float:
        return self._valid_until

    def leading_until(self) -> float | None:
        """The renew deadline while is_leader() (read before the check, so never later
        than the deadline that check was answered from), else None."""
        until = self._valid_until
        return until if self._leading and self._clock.now() < until else None

    # -- the loop -----------------------------------------------------------------------
    def step(self) -> float:
        """Acquire or renew once if due; returns seconds until the next step is due."""
        if self._retired:
            # Released or abandoned: a step that raced the withdrawal (a watch poke from
            # another thread, a scheduler's snapshot) must not take back what we freed.
            return self._timings.retry_period
        if self._leading:
            return self._step_leading()
        return self._step_following()

    def _step_leading(self) -> float:
        now = self._clock.now()
        # 1. Past our own renew deadline: we may no longer act as leader. Say so before
        #    doing anything else, and never write as leader again.
        if now >= self._valid_until:
            self._lose_deadline(now)
            return self._timings.retry_period
        # 2. The watch shows somebody else's record: we were overtaken (a client-go peer
        #    that judged us expired, or an operator's edit).
        observed = self._store.observed()
        if observed is not None and observed.version != self._version and observed.record.holder != self.candidate:
            self._lose(
                "taken", **self._tenure(now), holder=observed.record.holder, epoch_seen=observed.record.transitions,
            )
            return self._timings.retry_period
        if now < self._next_renew:
            return min(self._next_renew, self._valid_until) - now
        # 3. Renew: same holder, new renewTime (followers must see the record change), and
        #    always our own duration, as client-go writes it: a hand-edited one must not stick.
        assert self._record is not None
        record = self._record._replace(renew_time=self._now_wall(), lease_duration_seconds=self._timings.lease_duration)
        self._own_epoch = max(self._own_epoch, record.transitions)
        try:
            written = self._store.update(record, self._version, self._timeout(now))
        except RecordConflict:
            return self._after_renew_conflict(now)
        except CoordinationError as exc:
            # Not an answer (a timeout, Cassandra's unknown outcome that did not land, the
            # server down): still ours as far as we know; retry within the renew deadline.
            self._log_renewal("renew failed; retrying within the renew deadline", "error", now, error=exc)
            return max(0.0, min(self._timings.retry_period, self._valid_until - self._clock.now()))
        if self._clock.now() >= self._valid_until:
            # The write landed but came back too late: we already count as lost locally.
            self._lose("answered_late", **self._tenure(now), took=round(self._clock.now() - now, 3))
            return self._timings.retry_period
        self._confirm(written, sent=now)
        self._metrics.renewed(self._backend, self._clock.now() - now)
        self._log_event(Event.RENEWED, epoch=record.transitions, valid_until=self._wall_of(self._valid_until))
        return self._timings.retry_period

    def _after_renew_conflict(self, now: float) -> float:
        # 4. Somebody wrote the record since our last write: re-read, never overwrite.
        try:
            current = self._store.refresh(self._timeout(now))
        except CoordinationError as exc:
            self._log_renewal("renew conflict, and the re-read failed; retrying", "conflict", now, error=exc)
            return max(0.0, min(self._timings.retry_period, self._valid_until - self._clock.now()))
        if current is None and not self._creates_record and self._clock.now() < self._valid_until:
            # Deleted behind our back, and its owner re-creates it as it was (our record):
            # we still lead until our renew deadline, so keep renewing over the re-creation.
            self._log_renewal("renew conflict: the record was deleted; renewing over its re-creation", "conflict", now)
            return max(0.0, min(self._timings.retry_period, self._valid_until - self._clock.now()))
        if current is not None and current.record.holder == self.candidate and self._clock.now() < self._valid_until:
            # e.g. an annotation edit: still ours, renew over it — with our epoch, never a
            # lower one somebody wrote (the epoch is a fencing token: it must not go back).
            self._log_renewal(
                "renew conflict: the record changed but still names us; renewing over it", "conflict", now,
                version=current.version,
            )
            self._version = current.version
            ours = self._record.transitions if self._record else 0
            self._record = current.record._replace(data=self.data, transitions=max(ours, current.record.transitions))
            return 0.0
        holder = current.record.holder if current is not None else None
        self._lose("conflict", **self._tenure(now), holder=holder)
        return self._timings.retry_period

    def _step_following(self) -> float:
        now = self._clock.now()
        self._mark_read = None
        observed = self._store.observed()
        if observed is not None:
            self._highest_epoch = max(self._highest_epoch, observed.record.transitions)
            self._vanished_at = None
            self._missing.discard("election record")
        elif not self._creates_record:
            # 5b. Managed elsewhere (an operator): only its owner creates the record, at the
            #     right epoch. Wait; a watch event wakes us when it is back.
            return self._wait_for_owner("election record")
        elif self._highest_epoch or self._mark_left_behind(now):
            # 5a. The record we saw was deleted (or its mark outlived it): its holder may
            #     lead until its renew deadline, so wait a whole lease from when we noticed.
            if self._vanished_at is None:
                self._vanished_at = now
            if now < self._vanished_at + self._timings.lease_duration:
                return self._vanished_at + self._timings.lease_duration - now
        # 5. Held by someone whose lease has not expired in our own observation: wait
        #    until it would expire (a watch event wakes us earlier).
        if observed is not None and observed.record.held:
            expires = expires_at(observed)
            if now < expires:
                return expires - now
        # 6. Free (released, never held) or expired: try to acquire over what we observed,
        #    one above every epoch we saw and above the store's high-water mark.
        try:
            mark, version = self._read_mark(now)
        except CoordinationError as exc:
            log.info("acquire failed: the epoch mark could not be read",
                     extra={"service": self.service, "candidate": self.candidate, "error": str(exc)})
            return self._timings.retry_period
        if version is None and not self._creates_record:
            return self._wait_for_owner("epoch mark")
        self._missing.discard("epoch mark")
        if observed is not None and not observed.record.held and not self._a_release(observed.record, mark, version):
            # 6a. Free, but no release: below the mark (a release we saw late — somebody
            #     acquired since and raised the mark — or a record re-created lower: a
            #     release keeps its term's epoch, which the mark never exceeds), or not a
            #     release's shape (holderIdentity cleared by hand, a Lease re-created from a
            #     manifest). Re-read: a newer version is judged again from there; the same one
            #     was made by hand, and its last holder may lead until its renew deadline:
            #     wait a whole lease from when we observed it, as for a deleted record (5a).
            waited_out = observed.seen_at + self._timings.lease_duration
            if now < waited_out:
                try:
                    fresh = self._store.refresh(self._timeout(now))
                except CoordinationError:
                    return self._timings.retry_period
                if fresh is None or fresh.version != observed.version:
                    return 0.0
                return waited_out - self._clock.now()
        transitions = max(self._highest_epoch, mark) + 1
        now = self._clock.now()  # the read took time: the term is counted from here
        sent = self._wall()  # logged with ``acquired``: the acquisition took effect after this
        wall = from_unix(sent)
        record = LeaderRecord(
            holder=self.candidate, lease_duration_seconds=self._timings.lease_duration,
            acquire_time=wall, renew_time=wall, transitions=transitions, data=self.data,
        )
        self._own_epoch = max(self._own_epoch, transitions)
        try:
            if observed is None:
                written = self._store.create(record, self._timeout(now))
            else:
                written = self._store.update(record, observed.version, self._timeout(now))
        except RecordConflict:
            # 7. Lost the race (or our view was stale): re-read and judge again from there.
            try:
                fresh = self._store.refresh(self._timeout(now))
            except CoordinationError:
                return self._timings.retry_period
            changed = (fresh is None) != (observed is None) or (
                fresh is not None and observed is not None and fresh.version != observed.version
            )
            return 0.0 if changed else self._timings.retry_period
        except CoordinationError as exc:
            log.info("acquire failed", extra={"service": self.service, "candidate": self.candidate, "error": str(exc)})
            return self._timings.retry_period
        if not self._raise_mark(written.record.transitions, now):
            self._highest_epoch = max(self._highest_epoch, written.record.transitions)
            return self._timings.retry_period
        self._leading = True
        self._confirm(written, sent=now)
        if self._clock.now() >= self._valid_until:
            self._lose(
                "acquired_late", took=round(self._clock.now() - now, 3), renew_deadline=self._timings.renew_deadline
            )
            return self._timings.retry_period
        # The epoch the store wrote, which may be above the one asked for: a store that keeps
        # the epoch apart from the record (Cassandra's epoch row) knows better than a process
        # that never saw it.
        assert self._record is not None
        # ``acquired`` is stamped once the record write and the mark are confirmed, so the
        # term counts from a moment it certainly held; other processes may see the record
        # (``observed``) before that stamp, but never before ``sent``.
        self._log_event(Event.ACQUIRED, epoch=self._record.transitions, valid_until=self._wall_of(self._valid_until),
                        sent=sent)
        self._metrics.leadership(self._backend, self.service, self.candidate, True)
        self._on_change(self, True)
        return self._timings.retry_period

    def _raise_mark(self, epoch: int, now: float) -> bool:
        """6b. The record names us at ``epoch``: raise the store's high-water mark to it, by
        compare-and-set from below, before the term counts. Each epoch is reported by the
        one candidate whose write took the mark past it. False (not leading; the record
        expires, or is taken back above the mark by the next acquisition, ours included):
        the mark already reached ``epoch`` (another candidate reported it, after the record
        we saw was deleted) or could not be written."""
        try:
            mark, version = self._read_mark(now)
            for _ in range(3):
                if mark >= epoch:
                    break
                try:
                    self._store.write_mark(epoch, version, self._timeout(now))
                    return True
                except RecordConflict:
                    mark, version = self._store.read_mark(self._timeout(now))
        except CoordinationError as exc:
            log.warning("acquired the record but could not raise its epoch mark; not leading",
                        extra={"service": self.service, "candidate": self.candidate, "epoch": epoch,
                               "error": str(exc)})
            return False
        log.warning("acquired the record but its epoch mark is already at or above our epoch; not leading",
                    extra={"service": self.service, "candidate": self.candidate, "epoch": epoch, "mark": mark})
        return False

    @staticmethod
    def _a_release(record: LeaderRecord, mark: int, mark_version: str | None) -> bool:
        """Whether the free ``record`` may be taken at once: a release (its shape, at or above
        the mark), or nothing was ever issued on it (no epoch, the mark none or at 0: a Lease
        created free, as the operator creates one). A store without a mark object (Cassandra:
        its epoch row is the mark) judges its own free rows."""
        if mark_version is None:
            return record.transitions >= mark
        if record.transitions < mark:
            return False
        return is_release(record) or (record.transitions == 0 and mark == 0)

    def _mark_left_behind(self, now: float) -> bool:
        """No record, and this candidate never saw one: whether a mark says one existed (it
        was deleted: its holder may still lead). Read once per absence."""
        if self._vanished_at is not None:
            return True
        try:
            _, version = self._read_mark(now)
        except CoordinationError:
            return False  # the reservation that follows fails the same way and retries
        return version is not None

    def _wait_for_owner(self, what: str) -> float:
        """``what`` (the election record, its epoch mark) is missing and only its owner (the
        operator) creates it: warned once per absence; retried after retry_period."""
        if what not in self._missing:
            self._missing.add(what)
            log.warning(f"{what} missing; waiting for its owner (the operator) to create it",
                        extra={"service": self.service, "candidate": self.candidate})
        return self._timings.retry_period

    def _read_mark(self, now: float) -> tuple[int, str | None]:
        if self._mark_read is None:
            self._mark_read = self._store.read_mark(self._timeout(now))
        return self._mark_read

    # -- giving up ----------------------------------------------------------------------
    def holds(self) -> bool:
        """Whether this candidate leads, or the record as last observed names it: its renew
        deadline lapsed with nobody taking over, or its write landed but the answer was
        lost. Either way it is the leader everybody else sees, and it would take the record
        back at expiry: resign() must not ignore it."""
        if self.is_leader():
            return True
        observed = self._store.observed()
        return observed is not None and self._own_term(observed.record)

    def _own_term(self, record: LeaderRecord) -> bool:
        """Whether ``record`` is one of this elector's terms: it names this candidate at an
        epoch no higher than any this elector wrote (edited down, or an annotation changed,
        it still is). Above that it is another elector's term under the same id (a process
        restarted under it, a later attempt of the same lock whose acquisition came first):
        releasing it would free a record whose holder believes it leads."""
        return record.holder == self.candidate and record.transitions <= self._own_epoch

    def release(self) -> bool:
        """Write an empty holder if the record still names us (client-go's release). True if
        written. After release() this elector never writes again (step() does nothing).

        Followers watching the record take over at once. The write is a compare-and-set
        over the version we wrote (or, once our renew deadline lapsed, the version last
        observed naming us): if it matches, nobody else wrote since and the record names
        us, so freeing it is safe at any time. A conflict is re-read once: a version that
        still names us (an annotation edit, or our own renewal that landed after its request
        timed out) is released. Anything else leaves the record alone: it then expires as
        after a crash. "Names us" means one of this elector's own terms (``_own_term``): a
        record under the same id at a higher epoch, another elector's, is never released, so
        a release sent again late (a second withdrawal of the same candidate, racing a new
        attempt under its id) never frees that attempt's record.
        """
        was_leading = self.is_leader()
        observed = self._store.observed()
        self._retired = True
        if self._leading and not was_leading:
            # The renew deadline lapsed with no step since to notice it: say so as a step
            # would have (the history's term ends with ``lost``, not with nothing).
            self._lose_deadline(self._clock.now())
        if self._leading:
            self._leading = False
            self._metrics.leadership(self._backend, self.service, self.candidate, False)
            self._on_change(self, False)
        if was_leading and self._record is not None:
            self._log_event(Event.RESIGNED, epoch=self._record.transitions)
            record, version = self._record, self._version
        elif observed is not None and self._own_term(observed.record):
            record, version = observed.record, observed.version
        else:
            return False
        try:
            try:
                self._store.update(released(record, self._now_wall()), version, self._request_timeout)
            except RecordConflict:
                # Re-read once: a version that still names us is ours to release.
                current = self._store.refresh(self._request_timeout)
                if current is None or not self._own_term(current.record):
                    return False
                # At our epoch if it was edited down: a release below the mark is no release
                # to the candidates (6a), and would cost them a whole lease.
                ours = current.record._replace(transitions=max(current.record.transitions, record.transitions))
                self._store.update(released(ours, self._now_wall()), current.version, self._request_timeout)
        except (RecordConflict, CoordinationError) as exc:
            log.warning(
                "release failed; the record expires after its lease",
                extra={"service": self.service, "candidate": self.candidate, "error": str(exc)},
            )
            return False
        return True

    def renew_now(self) -> None:
        """Renew at once if leading and not yet renewed at this instant, whatever the retry
        period says: a process killed right after its heartbeat (memory's simulate_crash)."""
        if self._leading and self._clock.now() > self._sent:
            self._next_renew = self._clock.now()
            self.step()

    def abandon(self) -> None:
        """Stop without writing (a crash): is_leader() turns False; the record expires.
        step() does nothing afterwards."""
        self._retired = True
        self._leading = False

    # -- helpers ------------------------------------------------------------------------
    def _confirm(self, written: Observation, *, sent: float) -> None:
        self._version = written.version
        self._record = written.record._replace(data=self.data)
        self._highest_epoch = max(self._highest_epoch, written.record.transitions)
        self._own_epoch = max(self._own_epoch, written.record.transitions)  # a store may write above what was asked
        self._sent = sent
        self._valid_until = sent + self._timings.renew_deadline
        self._next_renew = sent + self._timings.retry_period

    def _lose(self, reason: str, **figures: Any) -> None:
        """Step down (``reason``: one of LOSS_REASONS), in one WARNING line with its figures."""
        epoch = self._record.transitions if self._record else None
        self._leading = False
        log.warning(
            f"lost leadership: {LOSS_REASONS[reason]}",
            extra={"service": self.service, "candidate": self.candidate, "reason": reason, "epoch": epoch, **figures},
        )
        self._log_event(Event.LOST, epoch=epoch)
        self._metrics.leadership(self._backend, self.service, self.candidate, False)
        self._on_change(self, False)

    def _lose_deadline(self, now: float) -> None:
        """Step down because the renew deadline passed without a renewal (noticed at ``now``)."""
        self._lose("deadline", **self._tenure(now), late_by=round(now - self._valid_until, 3))

    def _tenure(self, now: float) -> dict[str, float]:
        """The figures of a leader's standing at ``now`` (a renewal step that began then):
        seconds since its last successful write was sent, and left before its deadline."""
        return {
            "since_renewal": round(now - self._sent, 3),
            "left": round(self._valid_until - now, 3),
            "renew_deadline": self._timings.renew_deadline,
            "retry_period": self._timings.retry_period,
        }

    def _log_renewal(
        self, message: str, reason: str, now: float, *, error: Exception | None = None, **more: Any
    ) -> None:
        """A renewal that did not succeed but leaves us leading (retried within the deadline):
        INFO, WARNING once less than a retry period is left."""
        tenure = self._tenure(now)
        fields: dict[str, Any] = {"service": self.service, "candidate": self.candidate, "reason": reason, **tenure}
        if error is not None:
            fields.update(error=str(error), error_type=type(error).__name__)
        level = logging.WARNING if tenure["left"] < self._timings.retry_period else logging.INFO
        log.log(level, message, extra={**fields, **more})

    def _timeout(self, now: float) -> float:
        """A request must not outlive our validity (leading) or the request timeout."""
        if self._leading:
            return max(0.05, min(self._request_timeout, self._valid_until - now))
        return self._request_timeout

    def _log_event(self, event: str, **fields: Any) -> None:
        """One history event of this candidate's leadership, stamped now."""
        self._events.record(
            **self._stamp(), primitive=Primitive.LEADER_ELECTION, name=self.service, event=event,
            member=self.candidate, **fields,
        )

    def _stamp(self) -> dict[str, float | None]:
        """An event's ts, with the monotonic reading beside it when both clocks are real
        (the pipeline places events by it across wall-clock steps); a test's injected
        clocks give no ``mono``: it would not match their ``ts``."""
        real = self._wall is time.time and isinstance(self._clock, MonotonicClock)
        return {"ts": self._wall(), "mono": time.monotonic() if real else None}

    def _now_wall(self) -> dt.datetime:
        return from_unix(self._wall())

    def _wall_of(self, monotonic: float) -> float:
        return self._wall() + (monotonic - self._clock.now())

