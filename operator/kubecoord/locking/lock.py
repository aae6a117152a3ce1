"""A Lock held through a leader-election record: holding the lock is leading that record.

Usage::

    lock = coord.lock("nightly-report")
    with lock:                       # acquire (blocking), release on exit
        write_report(fencing_token=lock.token)
    if lock.acquire(timeout=5):      # or by hand
        try: ...
        finally: lock.release()

Each acquire() opens a LeaderElection handle on the record ``NAME``, nominates this
object's id and waits, driven by the handle's listener (the backend's watch), until the
id leads; release() closes the handle (a resign: client-go's empty holder, the znode's
delete), which wakes the next waiter at once. A timed-out or cancelled attempt closes its
handle too, so it withdraws its candidacy. So, per backend:

==========  ===========================================  ===============================
backend     the record                                   token
==========  ===========================================  ===============================
kubernetes  the Lease ``NAME`` (client-go LeaseLock      spec.leaseTransitions of the
            fields: a Go LeaseLock on it excludes us)    acquisition (+1 per holder)
zookeeper   /CHROOT/elections/NAME/<uuid>__lock__<seq>   the holding znode's czxid
            (kazoo Lock layout: a kazoo Lock on that
            path excludes us; FIFO by sequence)
memory      the in-process record table (lease core)     transitions, as on Kubernetes
==========  ===========================================  ===============================

Guarantees: those of kubecoord.api.Lock. A hold ends for good the first time this
object sees it end (is_held() False, or the election's listener naming somebody else):
a backend that would let the candidate lead again later (a re-acquired Lease, a
ZooKeeper session that reconnected) does so under a new token that this object never
reports as held — it withdraws the candidacy instead. Not guaranteed: fairness on lease
backends (no queue: whoever writes first after a release wins).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from kubecoord import validation
from kubecoord.api import Coordinator, LeaderElection, Lock, LockHolder
from kubecoord.errors import ClosedError, CoordinationError, InvalidArgumentError, LockHeldError, LockNotHeldError
from kubecoord.running.identity import default_id
from kubecoord.wire.events import Event, Primitive

log = logging.getLogger("kubecoord.locking")

RECHECK = 1.0
"""A waiter re-checks this often even without a listener call (a safety net: the wake-up
itself comes from the listener)."""


RESERVED_SUFFIX = "-gc"
"""Election names ending so are the group coordinators' (kubecoord.group_coordinator's
``GROUP-gc``; the operator's CRDs reserve them too): a lock there would contend with a group."""


def attempt_deadline(timeout: float | None) -> float | None:
    """The monotonic deadline of an acquire() with ``timeout`` (None: wait for ever);
    InvalidArgumentError for anything but None or a number >= 0."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0):
        raise InvalidArgumentError(f"timeout must be None or a number >= 0, got {timeout!r}")
    return None if timeout is None else time.monotonic() + timeout


def one_attempt(attempt: threading.Lock, timeout: float | None, body: Callable[[float | None], bool]) -> bool:
    """``body(deadline)`` while holding ``attempt`` (one acquire() at a time per object),
    waited for at most ``timeout``: False when another thread's attempt kept it that long."""
    deadline = attempt_deadline(timeout)
    if not attempt.acquire(timeout=-1 if timeout is None else timeout):
        return False
    try:
        return body(deadline)
    finally:
        attempt.release()


def check_lock_name(name: object, primitive: str = Primitive.LOCK) -> str:
    """A lock or semaphore name: a DNS-1123 label not ending in -gc."""
    checked = validation.check_name(name, f"{primitive} name")
    if checked.endswith(RESERVED_SUFFIX):
        raise InvalidArgumentError(
            f"{primitive} name {checked!r} ends in {RESERVED_SUFFIX!r}: such names are group coordinators' elections"
        )
    return checked


class ElectionLock(Lock):
    primitive = Primitive.LOCK

    def __init__(
        self,
        coordinator: Coordinator,
        name: str,
        *,
        holder_id: str | None = None,
        data: str = "",
        record: str | None = None,
        slot: int | None = None,
        primitive: str = Primitive.LOCK,
    ) -> None:
        self.name = check_lock_name(name, primitive)
        self.id = validation.check_id(holder_id, "id") if holder_id is not None else default_id()
        self.data = validation.check_data(data)
        self._record_name = validation.check_name(record if record is not None else name, "lock record name")
        self._slot = slot
        self._primitive = primitive
        self._coordinator = coordinator
        self._attempt = threading.Lock()  # one acquire() at a time on this object
        self._state = threading.Condition()  # guards everything below; wakes waiters
        self._election: LeaderElection | None = None
        self._token: int | None = None
        self._confirmed = False
        """The listener delivered our own id since this hold began: later deliveries of
        another value mean the hold ended (earlier ones may predate it)."""
        self._lost = False
        self._changes = 0
        self._closed = False
        self._observer: LeaderElection | None = None
        """Opened by the first attempt and kept until a hold ends (release, loss) or close():
        it keeps the coordinator's watch of the record (and so when it saw the current
        version) alive between attempts. Without it, each attempt's fresh handle would
        start a fresh observation and a waiter retrying short timeouts would never see a
        crashed holder expire. A Lock object dropped without close() has it closed when
        the object is garbage-collected."""

    # -- the interface ------------------------------------------------------------------
    def acquire(
        self, timeout: float | None = None, blocking: bool = True, *, cancel: threading.Event | None = None
    ) -> bool:
        return one_attempt(self._attempt, timeout, lambda deadline: self._acquire(deadline, blocking, cancel))

    def release(self) -> None:
        with self._state:
            election, token, lost = self._election, self._token, self._lost
            self._election, self._token, self._confirmed = None, None, False
        held = election is not None and token is not None and not lost and election.is_leader(self.id)
        if election is None or token is None:
            raise LockNotHeldError(f"{self._primitive} {self.name!r}: {self.id!r} does not hold it")
        if held:
            # Logged before the resign is sent: the successor may hold from when it lands.
            self._log(Event.RELEASED, token)
        election.remove_listener(self._on_leader)
        try:
            election.close()  # the resign: empty holder / node deleted; waiters wake at once
        except CoordinationError as exc:
            log.info("release could not resign; the record expires", extra={"lock": self.name, "error": str(exc)})
        self._close_observer()
        if not held:
            raise LockNotHeldError(f"{self._primitive} {self.name!r}: the hold of {self.id!r} had already ended")

    def is_held(self) -> bool:
        with self._state:
            election, token = self._election, self._token
            if election is None or token is None or self._lost:
                return False
        if election.is_leader(self.id):
            return True
        self._end(election, token)
        return False

    def held_until(self) -> float | None:
        with self._state:
            election, token = self._election, self._token
            if election is None or token is None or self._lost:
                return None
        until = election.leading_until(self.id)
        if until is None:
            self._end(election, token)
        return until

    @property
    def token(self) -> int | None:
        return self._token if self.is_held() else None

    @property
    def slot(self) -> int | None:
        return self._slot if self.is_held() else None

    def holders(self) -> list[LockHolder]:
        with self._coordinator.leader_election(self._record_name) as observer:
            leader = observer.get_leader()
        if leader is None:
            return []
        return [LockHolder(leader.id, leader.data, leader.epoch, self._slot or 0)]

    def close(self) -> None:
        with self._state:
            self._closed = True
            self._state.notify_all()
        if self.is_held():
            with contextlib.suppress(LockNotHeldError):
                self.release()
        with self._state:
            election, self._election, self._token = self._election, None, None
            observer, self._observer = self._observer, None
        for handle in (election, observer):
            if handle is not None:
                handle.close()

    # -- acquiring ----------------------------------------------------------------------
    def _acquire(self, deadline: float | None, blocking: bool, cancel: threading.Event | None) -> bool:
        if self.is_held():
            raise LockHeldError(f"{self._primitive} {self.name!r} is already held by this object ({self.id!r})")
        with self._state:
            if self._closed:
                raise ClosedError(f"this {self._primitive} object was closed")
            stale, self._election = self._election, None
        if stale is not None:
            stale.close()  # a hold that ended (lost): withdraw its candidacy for good
        if self._observer is None:
            observer = self._coordinator.leader_election(self._record_name)
            observer.add_listener(_ignore)
            weakref.finalize(self, _close_quietly, observer)
            self._observer = observer
        election = self._coordinator.leader_election(self._record_name)
        watcher = _Watcher(self, cancel)
        election.add_listener(self._on_leader)
        with self._state:
            self._election, self._token, self._lost, self._confirmed = election, None, False, False
        try:
            election.nominate(self.id, self.data)
            while True:
                with self._state:
                    seen = self._changes
                if election.is_leader(self.id):
                    leader = election.get_leader()
                    if leader is not None and leader.id == self.id and election.is_leader(self.id):
                        with self._state:
                            self._token = leader.epoch
                        self._log(Event.ACQUIRED, leader.epoch)
                        return True
                if not blocking or watcher.should_stop(deadline):
                    break
                watcher.wait(seen, deadline)
        except BaseException:
            self._abandon(election)
            raise
        self._abandon(election)
        return False

    def _close_observer(self) -> None:
        """The hold ended: the next attempt (if any) watches afresh. Keeps one Lock object per
        critical section (``with coord.lock(name):`` in a loop) from accumulating handles."""
        with self._state:
            observer, self._observer = self._observer, None
        if observer is not None:
            _close_quietly(observer)

    def _abandon(self, election: LeaderElection) -> None:
        """Withdraw an attempt that did not end in a hold (or failed)."""
        with self._state:
            if self._election is election:
                self._election, self._token = None, None
        election.remove_listener(self._on_leader)
        try:
            election.close()
        except CoordinationError as exc:
            log.info("could not withdraw a lock attempt", extra={"lock": self.name, "error": str(exc)})

    # -- noticing the end of a hold -----------------------------------------------------
    def _on_leader(self, leader: str | None) -> None:
        """The election's listener (the coordinator's dispatcher thread)."""
        with self._state:
            self._changes += 1
            self._state.notify_all()
            election, token = self._election, self._token
            if election is None or self._lost:
                return
            if leader == self.id:
                # Also while acquire() has not recorded the token yet: each attempt has an
                # election handle of its own, so our id there is this attempt's leadership.
                # Dropped, the hold's end (the next call) would be taken for a call that
                # predates it, and a hold lost and won back reported under its old token.
                self._confirmed = True
                return
            if token is None or not self._confirmed:
                return  # delivered before our own id: it predates this hold
        self._end(election, token)

    def _end(self, election: LeaderElection, token: int) -> None:
        """The hold under ``token`` ended without a release: log it once and withdraw the
        candidacy (in the background: is_held() answers locally)."""
        with self._state:
            if self._lost or self._election is not election or self._token != token:
                return
            self._lost = True
            self._state.notify_all()
        self._log(Event.LOST, token)
        election.remove_listener(self._on_leader)
        threading.Thread(target=_close_quietly, args=(election,), name="kubecoord-lock-withdraw", daemon=True).start()

    def _log(self, event: str, token: int) -> None:
        fields: dict[str, Any] = {"member": self.id, "epoch": token}
        if self._slot is not None:
            fields["slot"] = self._slot
        self._coordinator.events.record(primitive=self._primitive, name=self.name, event=event, **fields)
        log.debug("lock %s", event, extra={"lock": self.name, "holder": self.id, "token": token})


class _Watcher:
    """How an acquire() waits: on the lock's condition, woken by listener calls, close()
    and ``cancel``; re-checking at least every RECHECK seconds."""

    def __init__(self, lock: ElectionLock, cancel: threading.Event | None) -> None:
        self._lock = lock
        self._cancel = cancel

    def should_stop(self, deadline: float | None) -> bool:
        if self._cancel is not None and self._cancel.is_set():
            return True
        if self._lock._closed:
            return True
        return deadline is not None and time.monotonic() >= deadline

    def wait(self, seen: int, deadline: float | None) -> None:
        # A cancel Event cannot notify our condition: check it at a short interval instead.
        step = RECHECK if self._cancel is None else 0.05
        limit = step if deadline is None else max(0.0, min(step, deadline - time.monotonic()))
        with self._lock._state:
            if self._lock._changes == seen and not self._lock._closed:
                self._lock._state.wait(limit)


def _ignore(leader: str | None) -> None:
    """The observer's listener: a listener is what keeps a handle watching."""


def _close_quietly(election: LeaderElection) -> None:
    try:
        election.close()
    except CoordinationError as exc:
        log.info("could not withdraw a lost lock's candidacy", extra={"error": str(exc)})
