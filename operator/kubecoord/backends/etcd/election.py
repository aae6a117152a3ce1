"""Leader election in etcd's concurrency.Election layout: a key per candidate, lowest create
revision leads.

Status: interoperable with ``etcdctl elect NAME`` and ``etcdctl lock NAME`` (etcd's
concurrency.Election and concurrency.Mutex). Usage::

    le = coord.leader_election("billing")       # keys billing/<lease hex> (PREFIX/billing/... with a PREFIX)
    le.nominate("pod-a", data="host=10.0.0.7")  # True if pod-a leads now

Each candidate puts ``NAME/<lease hex>`` (``NAME/<lease hex>_N`` for the N-th further
candidate of the same coordinator in that election) if absent, attached to the
coordinator's lease, with the value ``ID + "\\n" + DATA`` (an etcdctl candidate's proposal
reads as its id; an etcdctl lock's empty value as its lease hex). The key with the lowest
create revision leads; the epoch is that create revision, strictly increasing across
leaders because revisions only grow. The handle watches the prefix ``NAME/`` (watches.py)
and re-evaluates on every change.

Guarantees:

- Never two leaders among working candidates: a key leads only once every key created
  before it is gone, and a deleted key never comes back (a new one has a higher revision).
- is_leader() is answered from the lease's keep-alive deadline (session.py): it turns
  False before the lease, and with it the key, can expire on the server.
- resign() deletes the leader's key (compare on its create revision, so a re-created key
  is never touched); close() does so for every candidate of the handle.
- A candidate whose key vanished (deleted behind its back, or its lease expired) stops
  leading as soon as the watch shows it, and re-enters with a new key (a new epoch),
  its put sent again every retry period while etcd is out of reach.

- No candidate inherits another candidacy's key or epoch. A key whose delete failed
  (resign, close or a nominate() that raised, with etcd out of reach) is deleted again
  every retry period until etcd takes it or the lease is replaced; meanwhile it leads in
  etcd's view (nobody believes it does) and its slot is not reused.

Not guaranteed: that a candidate learns of its key being deleted by a third party
before another candidate acts (the watch is a stream: it learns on the next event).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from kubecoord._core.handles import ElectionHandle, SessionLeadership
from kubecoord.api import Leader
from kubecoord.backends.etcd import txn
from kubecoord.backends.etcd.context import EtcdContext
from kubecoord.backends.etcd.errors import translating
from kubecoord.backends.etcd.options import Options
from kubecoord.backends.etcd.session import LeaseSession
from kubecoord.backends.etcd.transport import b64, prefix_end
from kubecoord.backends.etcd.watches import Entry, PrefixView
from kubecoord.errors import CoordinationError, MemberExistsError
from kubecoord.wire.events import Event

log = logging.getLogger("kubecoord.etcd")


def candidate_value(candidate_id: str, data: str) -> str:
    return f"{candidate_id}\n{data}"


def parse_candidate(entry: Entry) -> tuple[str, str]:
    """(id, data) of a candidate key: kubecoord's ``ID\\nDATA``, an etcdctl proposal (id),
    or an etcdctl lock's empty value (the key's lease hex as id)."""
    text = entry.value.decode("utf-8", errors="replace")
    candidate_id, _, data = text.partition("\n")
    return (candidate_id or format(entry.lease, "x")), data


@dataclass(eq=False)
class _Candidate:
    id: str
    data: str
    slot: int
    key: str = ""
    create_revision: int = 0
    sent: float = 0.0
    """Monotonic time its key's create went out no earlier than (logged as ``sent`` with
    ``acquired``, on the wall clock of that event's ``ts``): it leads once every older key
    is gone, which other processes may see before its own view does, so ``acquired``'s
    stamp bounds nothing from below."""
    generation: int = 0
    leading: bool = False
    unsure: str = ""
    """The key of a put whose outcome is unknown (the candidate never learned its revision):
    its withdrawal deletes it if it holds the candidate's value."""
    withdrawn: bool = False
    """Its candidacy ended (resign, close, a failed nominate): no key is put for it again."""
    entering: threading.Lock = field(default_factory=threading.Lock)
    """Held while its key is put or withdrawn: a re-entry racing the withdrawal either
    lands before it (and is withdrawn) or sees ``withdrawn`` and puts nothing."""


class EtcdElection(SessionLeadership[_Candidate, LeaseSession], ElectionHandle):
    def __init__(self, context: EtcdContext, service: str, *, timings: Options | None = None) -> None:
        super().__init__(context, service, context.events)
        self.service = service
        self._context = context
        self._own_session = timings is not None
        """With its own timings, the handle's candidates live on a lease of their own."""
        self._session = LeaseSession(context.transport, timings) if timings is not None else context.session
        self._prefix = f"{context.root}{service}/"
        self._lock = threading.RLock()
        self._candidates: dict[str, _Candidate] = {}
        self._view: PrefixView | None = None
        self._leader: str | None = None
        self._leader_known = False
        self._session.subscribe(self._on_new_lease)

    # -- interface ------------------------------------------------------------------------
    def _nominate(self, candidate_id: str, data: str) -> bool:
        with self._lock:
            if candidate_id in self._candidates:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
            candidate = _Candidate(candidate_id, data, self._context.claim_slot(self.service))
            self._candidates[candidate_id] = candidate
        try:
            with translating():
                self._campaign(candidate)
                view = self._ensure_view()
                view.wait_for(candidate.create_revision, self._context.options.request_timeout)
            self._evaluate()
        except BaseException:
            with self._lock:
                if self._candidates.get(candidate_id) is candidate:
                    del self._candidates[candidate_id]
            self._withdraw(candidate)
            raise
        return self._holds(candidate)

    def _get_leader(self) -> Leader | None:
        with translating():
            answer = self._context.transport.call("kv/range", {
                "key": b64(self._prefix), "range_end": prefix_end(self._prefix),
                "sort_order": "ASCEND", "sort_target": "CREATE", "limit": "1",
            }, idempotent=True)
        kvs = answer.get("kvs", [])
        if not kvs:
            return None
        entry = Entry.of(kvs[0])
        candidate_id, data = parse_candidate(entry)
        return Leader(candidate_id, data, entry.create_revision)

    def _resign(self, candidate_id: str) -> None:
        with self._lock:
            candidate = self._candidates.get(candidate_id)
            if candidate is None or not candidate.leading:
                return
            proven, ended = self._holds(candidate), self._ended()
            candidate.leading = False  # before the delete: the successor may lead once it lands
            del self._candidates[candidate_id]
        self._withdraw(candidate)
        self._record_term(Event.RESIGNED if proven else Event.LOST, candidate, ended)

    def _listener_added(self, first: bool) -> None:
        if first and not self._closed:
            with translating():
                view = self._ensure_view()
                # The leader the view shows once it read the range is the listeners' baseline.
                if view.wait_for(1, self._context.options.request_timeout):
                    self._evaluate(view)

    # -- the candidate's key ---------------------------------------------------------------
    def _holds(self, candidate: _Candidate) -> bool:
        session = self._session
        return candidate.leading and candidate.generation == session.generation and session.alive()

    def _campaign(self, candidate: _Candidate) -> None:
        """Put the candidate's key if absent (idempotent: the key is this lease's alone),
        and learn its create revision (the epoch should it lead); nothing once withdrawn."""
        with candidate.entering:
            if not candidate.withdrawn:
                self._put_key(candidate)

    def _put_key(self, candidate: _Candidate) -> None:
        session = self._session
        generation, lease, granted = session.generation, session.lease_id, session.granted_at
        suffix = format(lease, "x") + (f"_{candidate.slot}" if candidate.slot else "")
        key = self._prefix + suffix
        value = candidate_value(candidate.id, candidate.data)
        try:
            revision, sent = self._put_anew(key, value, lease, granted)
        except BaseException:
            with self._lock:
                candidate.unsure, candidate.generation = key, generation
            raise
        with self._lock:
            candidate.key, candidate.create_revision, candidate.generation = key, revision, generation
            candidate.sent, candidate.unsure = sent, ""
            candidate.leading = False

    def _put_anew(self, key: str, value: str, lease: int, granted: float) -> tuple[int, float]:
        """Put ``key`` if absent; its create revision and when the put went out at the earliest."""
        for _ in range(2):
            sent = time.monotonic()
            answer = txn.run(
                self._context.transport, [txn.created(key, 0)], [txn.put(key, value, lease=lease)], [txn.get(key)],
                idempotent=True,
            )
            if answer.succeeded:
                revision = answer.revision
                break
            existing = answer.read(0)
            if existing is None:
                raise CoordinationError(f"etcd election {self.service}: candidate key {key} vanished while created")
            if existing.value == value.encode():
                # This candidate's own earlier attempt (an answer lost on the way back): its
                # revision is no other candidacy's epoch.
                revision, sent = existing.create_revision, granted
                break
            # Another candidacy's key whose fate its candidate could not learn (a put whose
            # outcome was unknown): its revision may be that candidacy's epoch, so it is
            # deleted, never taken over, and the key put anew with a revision of its own.
            txn.run(self._context.transport, [txn.created(key, existing.create_revision)], [txn.delete(key)], [],
                    idempotent=True)
        else:
            raise CoordinationError(f"etcd election {self.service}: candidate key {key} was re-created while put")
        return revision, sent

    def _withdraw(self, candidate: _Candidate) -> None:
        """End the candidacy for good: delete its key (if it has one, or the key of a put
        whose outcome is unknown, if it holds the candidate's value) and free its slot.

        A key whose delete fails keeps its slot, so no later candidate of this lease puts
        the same key and inherits its epoch; it is deleted again every retry period until
        etcd takes the delete or the lease it hangs on is replaced (the key goes with it).
        Until then it leads in etcd's view, and nobody in this process believes it does."""
        with candidate.entering:
            already, candidate.withdrawn = candidate.withdrawn, True
            if already:
                return
            if (candidate.key or candidate.unsure) and not self._delete_key(candidate):
                threading.Thread(target=self._delete_later, args=(candidate,), daemon=True,
                                 name=f"kubecoord-etcd-withdraw-{self.service}").start()
                return
            self._context.release_slot(self.service, candidate.slot)

    def _delete_key(self, candidate: _Candidate) -> bool:
        """Delete the candidate's key if it is still the one it put; True once it is gone
        (deleted now, or before: the compare then fails and nothing is written)."""
        try:
            with translating():
                if candidate.key:
                    txn.run(self._context.transport, [txn.created(candidate.key, candidate.create_revision)],
                            [txn.delete(candidate.key)], [], idempotent=True)
                if candidate.unsure:  # put with its value, if at all: no other candidacy has its slot
                    value = candidate_value(candidate.id, candidate.data)
                    txn.run(self._context.transport, [txn.valued(candidate.unsure, value)],
                            [txn.delete(candidate.unsure)], [], idempotent=True)
            return True
        except CoordinationError as exc:
            log.info("etcd candidate key not deleted yet", extra={"key": candidate.key, "error": str(exc)})
            return False

    def _delete_later(self, candidate: _Candidate) -> None:
        try:
            while candidate.generation == self._session.generation and not self._context.closed:
                time.sleep(self._context.options.period)
                if self._delete_key(candidate):
                    return
        finally:
            self._context.release_slot(self.service, candidate.slot)

    # -- the view ---------------------------------------------------------------------------
    def _ensure_view(self) -> PrefixView:
        with self._lock:
            if self._view is None:
                self._view = self._context.watch_prefix(self._prefix, self._evaluate, self.service)
            return self._view

    def _evaluate(self, view: PrefixView | None = None) -> None:
        """Who leads by the view; the candidates' transitions; listeners on a change."""
        view = view if view is not None else self._view
        if view is None or self._closed:
            return
        entries = view.entries()
        order = sorted(entries.values(), key=lambda e: e.create_revision)
        lowest = order[0] if order else None
        events: list[tuple[str, _Candidate]] = []
        again: list[_Candidate] = []
        with self._lock:
            for candidate in self._candidates.values():
                if not candidate.key or view.revision < candidate.create_revision:
                    continue
                mine = entries.get(candidate.key)
                if mine is None or mine.create_revision != candidate.create_revision:
                    if candidate.leading:
                        events.append((Event.LOST, candidate))
                    candidate.leading = False
                    candidate.key = ""
                    again.append(candidate)
                    continue
                leads = lowest is not None and lowest.key == candidate.key
                if leads and not candidate.leading:
                    events.append((Event.ACQUIRED, candidate))
                elif candidate.leading and not leads:
                    events.append((Event.LOST, candidate))
                candidate.leading = leads
            leader = parse_candidate(lowest)[0] if lowest is not None else None
            changed = self._leader_known and leader != self._leader
            self._leader, self._leader_known = leader, True
        for event, candidate in events:
            self._record_term(event, candidate)
        if changed:
            if lowest is not None:
                self._record(Event.OBSERVED, member=leader, epoch=lowest.create_revision)
            self._context.dispatcher.notify(self._listeners, leader)
        for candidate in again:
            self._reenter(candidate)

    def _reenter(self, candidate: _Candidate) -> None:
        """A candidate whose key vanished runs again with a new key, on a thread of its own
        (the view's thread must keep reading); a put that fails is sent again every retry
        period while the candidate is on the handle without a key."""

        def campaign() -> None:
            while True:
                try:
                    with translating():
                        self._campaign(candidate)
                    break
                except CoordinationError as exc:
                    log.info("etcd candidate could not re-enter", extra={"service": self.service, "error": str(exc)})
                time.sleep(self._context.options.period)
                if self._closed or candidate.key or self._candidates.get(candidate.id) is not candidate:
                    return
            self._evaluate()

        if not self._closed and self._candidates.get(candidate.id) is candidate:
            threading.Thread(target=campaign, name=f"kubecoord-etcd-reenter-{self.service}", daemon=True).start()

    def _on_new_lease(self, lease: int) -> None:
        with self._lock:
            candidates = list(self._candidates.values())
        for candidate in candidates:
            if candidate.leading:
                self._record_term(Event.LOST, candidate)
            candidate.leading, candidate.key = False, ""
            self._reenter(candidate)

    def _ended(self) -> float:
        """When a term ending now ended (wall clock): now, or earlier when the lease's
        keep-alive deadline ran out first (the pipeline takes it as the end of the term)."""
        return time.time() - max(0.0, time.monotonic() - self._session.alive_until)

    def _proven(self) -> float:
        """Until when the server keeps this coordinator's lease, hence a leader's key, at least
        (wall clock): a process killed now still leads until then."""
        return time.time() + (self._session.proven_until - time.monotonic())

    def _record_term(self, event: str, candidate: _Candidate, ended: float | None = None) -> None:
        """A candidate's term began or ended. ``acquired`` carries as valid_until the lease's
        proven life (the earliest end of the term if the process died then: renewals are
        not logged, as on ZooKeeper) and the candidate's ``sent``; an end carries ``ended``:
        when the candidate stopped believing it leads (before its delete was sent), else now
        or the lease's deadline, whichever came first."""
        if event == Event.ACQUIRED:
            ended = self._proven()
        elif ended is None:
            ended = self._ended()
        # ``sent`` on the wall clock as it reads now, as ``ts`` is: the key may have been put
        # long ago, and a step of the wall clock since must not move it past the acquisition.
        sent = time.time() - (time.monotonic() - candidate.sent) if event == Event.ACQUIRED else None
        self._record(event, member=candidate.id, epoch=candidate.create_revision, valid_until=ended, sent=sent)
        if event == Event.ACQUIRED:
            self._leadership(candidate.id, True)
        elif event in (Event.LOST, Event.RESIGNED):
            self._leadership(candidate.id, False)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        with self._lock:
            candidates = list(self._candidates.values())
            self._candidates.clear()
        for candidate in candidates:
            proven, ended, was = self._holds(candidate), self._ended(), candidate.leading
            candidate.leading = False
            self._withdraw(candidate)
            if was:
                self._record_term(Event.RESIGNED if proven else Event.LOST, candidate, ended)
        self._closed = True
        self._stop(revoke=True)

    def crash(self) -> None:
        self._closed = True
        self._stop()

    def _stop(self, *, revoke: bool = False) -> None:
        self._session.unsubscribe(self._on_new_lease)
        with self._lock:
            view, self._view = self._view, None
        if view is not None:
            view.stop()
        if self._own_session:
            self._session.close(revoke=revoke)
