"""Leader election with ephemeral sequential znodes (kazoo's Lock/Election recipe layout).

Status: the ZooKeeper recipe, interoperable with kazoo. Usage::

    le = coord.leader_election("billing")        # /CHROOT/elections/billing
    le.nominate("pod-a", data="host=10.0.0.7")   # True if pod-a leads now

Each candidate creates ``<uuid4 hex>__lock__<seq>`` under /CHROOT/elections/SERVICE with
the data ``ID + "\\n" + DATA``: the node naming of kazoo's Lock, so a kazoo ``Election``
or ``Lock`` contender on the same path is a candidate like any other (its identifier
reads as the id, with empty data). The lowest sequence leads. Each candidate watches
only its predecessor (no herd effect); a handle with listeners also watches the lowest
node, to tell them when the leader changes. The epoch is the leading znode's czxid,
which ZooKeeper makes strictly increasing across leadership changes.

Guarantees:

- Never two leaders among correctly working candidates: a node leads only while it is
  the lowest; the one below it must have been deleted (resign, close) or expired with
  its session first.
- On SUSPENDED (connection lost, session maybe alive) a leader's is_leader() is False at
  once and listeners are told None (uncertain); it does no leader work until CONNECTED
  and a fresh read confirms its node is still the lowest ("renewed" in the history).
- On LOST (session expired) leadership is gone ("lost"); when the client reconnects
  with a new session, every candidate still nominated re-enters with a new node (and so
  a new, higher epoch should it win again).
- resign() deletes the leader's node and withdraws its candidacy (nominate again to
  run again); close() does that for every candidate of the handle. Neither fails: a
  delete that got no answer (it may have landed) is sent again on the session's next
  CONNECTED while the node is still this session's; meanwhile the node may lead in
  ZooKeeper's view, and nobody believes it does.
- A nominate() that raises leaves nothing behind: no candidate on the handle and no node
  on the server — one whose create was applied but never answered is found by its unique
  name prefix and deleted, at once or on the session's next CONNECTED. A candidate that
  re-enters (its node deleted behind its back) takes such a node of its session, if one
  is there, rather than queueing behind it.

- A leader leads only within its session's proven life (session.alive_until, from the
  session timeout the server negotiated, not the requested one): resumed from a freeze
  longer than that, is_leader() is False before kazoo has noticed anything.

Not guaranteed: that a leader stops acting before its session expires on the server if
its process is frozen (GC pause, SIGSTOP): kazoo notices SUSPENDED only when the
process runs again. Use the epoch as a fencing token where the work can check it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import uuid
from dataclasses import dataclass, field

from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kubecoord._core.handles import ElectionHandle, SessionLeadership
from kubecoord.api import Leader
from kubecoord.backends.zookeeper.context import ZooKeeperContext
from kubecoord.backends.zookeeper.errors import translating
from kubecoord.backends.zookeeper.handle import ZooKeeperHandle
from kubecoord.backends.zookeeper.session import CONNECTED, LOST, Session
from kubecoord.backends.zookeeper.watches import read_children
from kubecoord.errors import MemberExistsError
from kubecoord.wire.events import TERM_ENDS, Event

log = logging.getLogger("kubecoord.zookeeper")

NODE_NAME = "__lock__"
"""kazoo Lock's contender marker; the sequence number follows it."""
_CONTENDER = re.compile(r"__lock__(-?\d{10})$")
_MAX_ROUNDS = 20
"""Re-reads allowed in one evaluation while nodes come and go under it."""


def contenders(children: list[str]) -> list[str]:
    """Contender node names, lowest sequence first, ordered exactly as kazoo orders them."""
    matches = [m for m in map(_CONTENDER.search, children) if m is not None]
    return [m.string for m in sorted(matches, key=lambda m: m.groups())]


def node_data(candidate_id: str, data: str) -> bytes:
    return f"{candidate_id}\n{data}".encode()


def parse_node_data(raw: bytes) -> tuple[str, str]:
    """(id, data); a kazoo contender's identifier has no newline and so has empty data."""
    candidate_id, _, data = raw.decode("utf-8", errors="replace").partition("\n")
    return candidate_id, data


@dataclass(eq=False)
class _Candidate:
    id: str
    data: str
    prefix: str = field(default_factory=lambda: uuid.uuid4().hex + NODE_NAME)
    node: str | None = None
    epoch: int = 0
    leading: bool = False
    confirmed: int = -1
    """The session generation in which leadership was last confirmed by a read."""
    first_create: float | None = None
    """Monotonic time of the first create sent under this candidate's prefix (an adopted
    node's create was sent no earlier)."""
    created: float | None = None
    """Monotonic time the create of ``node`` was sent: its leadership took effect after it
    (logged as ``sent`` with ``acquired``, on the wall clock of that event's ``ts``; other
    processes may see it lead before ``acquired`` is stamped, never before this)."""


class ZooKeeperElection(SessionLeadership[_Candidate, Session], ZooKeeperHandle, ElectionHandle):
    folder = "elections"

    def __init__(self, context: ZooKeeperContext, service: str) -> None:
        super().__init__(context, service)
        self._candidates: dict[str, _Candidate] = {}
        self._view: str | None = None
        self._identities: dict[str, tuple[str, str, int]] = {}
        self._session.subscribe(self._on_state)

    # -- interface ------------------------------------------------------------------
    def _nominate(self, candidate_id: str, data: str) -> bool:
        with self._lock, translating():
            if candidate_id in self._candidates:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
            candidate = _Candidate(candidate_id, data)
            owner = self._session.last_session_id
            try:
                self._create(candidate)
                self._candidates[candidate_id] = candidate
                self._evaluate_or_retry()
            except BaseException:
                # Whatever nominate() raises, it leaves nothing behind: no candidate on the
                # handle, and no node on the server, even one whose create was applied but
                # not answered (it would lead, or queue, for the rest of the session).
                if self._candidates.get(candidate_id) is candidate:
                    del self._candidates[candidate_id]
                self._withdraw_node(candidate, owner)
                raise
            return self._holds(candidate)

    def _withdraw_node(self, candidate: _Candidate, owner: int | None) -> None:
        """Delete the node of a candidate that nominate() gave up on: now if it can, else on
        the session's next CONNECTED; a node whose name was never learnt, by its prefix."""
        candidate.leading = False
        if candidate.node is not None:
            self._delete_on_close(f"{self.path}/{candidate.node}", unique=True)
            candidate.node = None
            return
        owner = owner if owner is not None else self._session.last_session_id
        if owner is not None:
            self._session.delete_prefixed_when_connected(self.path, candidate.prefix, owner)

    def _get_leader(self) -> Leader | None:
        with translating():
            for _ in range(_MAX_ROUNDS):
                order = contenders(read_children(self._session, self.path))
                if not order:
                    return None
                try:
                    candidate_id, data, epoch = self._identify(order[0])
                except NoNodeError:
                    continue  # the leader left while we looked: read again
                return Leader(candidate_id, data, epoch)
            raise ConnectionLoss("election kept changing while reading it")

    def _resign(self, candidate_id: str) -> None:
        with self._lock, translating():
            candidate = self._candidates.get(candidate_id)
            if candidate is None or not candidate.leading:
                return
            proven, ended = self._holds(candidate), self._ended(candidate)
            # Stop believing it leads before the delete is sent: the successor may lead as
            # soon as the delete lands, before its answer is back. The candidacy is withdrawn
            # whatever the delete's fate: one that got no answer (it may have landed) is sent
            # again on the session's next CONNECTED if the node is still this session's, as
            # close() does, and nothing of this candidate re-enters or leads meanwhile.
            candidate.leading = False
            del self._candidates[candidate_id]
            if candidate.node is not None:
                self._delete_on_close(f"{self.path}/{candidate.node}", unique=True)
                candidate.node = None
        self._record_end(candidate, proven, ended)

    def _listener_added(self, first: bool) -> None:
        if first and not self._closed:
            # The current leader is the baseline; listeners hear of changes from here on.
            with self._lock:
                self._evaluate_or_retry(notify=False)

    def close(self) -> None:
        self._close_session_bound(self._on_state, self._release_candidates)

    def _release_candidates(self) -> None:
        for candidate in self._candidates.values():
            # Closed: is_leader() is false from here, before the delete is sent.
            proven, ended = self._holds(candidate), self._ended(candidate)
            if candidate.node is not None:
                self._delete_on_close(f"{self.path}/{candidate.node}", unique=True)
            if candidate.leading:
                self._record_end(candidate, proven, ended)
        self._candidates.clear()

    # -- znodes ---------------------------------------------------------------------
    def _holds(self, candidate: _Candidate) -> bool:
        # Within the session's proven life too: a process resumed after a pause longer than
        # the session must not believe it leads until kazoo notices (session.alive_until).
        return (
            candidate.leading and self._session.connected and candidate.confirmed == self._session.generation
            and time.monotonic() < self._session.alive_until
        )

    def _create(self, candidate: _Candidate) -> None:
        client = self._session.client
        sent = time.monotonic()
        if candidate.first_create is None:
            candidate.first_create = sent
        try:
            path, stat = self._session.call(
                client.create_async, f"{self.path}/{candidate.prefix}", node_data(candidate.id, candidate.data),
                ephemeral=True, sequence=True, makepath=True, include_data=True,
            )
        except (ConnectionLoss, KazooTimeoutError):
            sent = candidate.first_create  # the node found may be an earlier attempt's
            # The create may have happened: find it by its unique prefix (kazoo's Lock does the same).
            mine = [n for n in read_children(self._session, self.path) if n.startswith(candidate.prefix)]
            if not mine:
                raise
            path = f"{self.path}/{mine[0]}"
            stat = self._session.read(client.exists_async, path)
            if stat is None:
                raise
        candidate.node = path.rsplit("/", 1)[1]
        candidate.epoch = stat.czxid
        candidate.leading = False
        candidate.created = sent

    def _adopt(self, candidate: _Candidate, order: list[str]) -> bool:
        """Take a node of this session that bears the candidate's unique prefix (an earlier
        create applied but never answered) instead of making another one behind it; any
        further such node is deleted. True if one was adopted."""
        mine = [node for node in order if node.startswith(candidate.prefix)]
        adopted = False
        for node in mine:
            path = f"{self.path}/{node}"
            stat = self._session.read(self._session.client.exists_async, path)
            if stat is None or stat.ephemeralOwner != self._session.session_id:
                continue
            if adopted:
                with contextlib.suppress(NoNodeError):
                    self._session.call(self._session.client.delete_async, path)
                continue
            candidate.node, candidate.epoch, candidate.leading = node, stat.czxid, False
            candidate.created = candidate.first_create
            adopted = True
        return adopted

    def _identify(self, node: str) -> tuple[str, str, int]:
        """(id, data, czxid) of a contender node; contender nodes never change, so cache."""
        if node not in self._identities:
            raw, stat = self._session.read(self._session.client.get_async, f"{self.path}/{node}")
            if len(self._identities) > 1000:
                self._identities.clear()
            self._identities[node] = (*parse_node_data(raw), stat.czxid)
        return self._identities[node]

    # -- the election loop (worker thread, or the caller's under the lock) -------------
    def _on_watch(self, _event: object) -> None:
        if not self._closed:
            self._session.post(self, self._evaluate_in_background)

    def _evaluate_in_background(self) -> None:
        with self._lock:
            self._evaluate_or_retry()

    def _evaluate_or_retry(self, *, notify: bool = True) -> None:
        if self._closed or not self._session.connected:
            return  # CONNECTED evaluates again
        try:
            self._evaluate(notify=notify)
        except (KazooException, KazooTimeoutError) as exc:
            log.debug("election evaluation failed; retrying", extra={"service": self.service, "error": repr(exc)})
            self._retry_later(self, self._evaluate_in_background)

    def _evaluate(self, *, notify: bool) -> None:
        client = self._session.client
        for _ in range(_MAX_ROUNDS):
            generation = self._session.generation
            started = time.time()
            order = contenders(read_children(self._session, self.path))
            # 1. Candidates whose node is gone (session expired, deleted by hand) re-enter.
            missing = [c for c in self._candidates.values() if c.node not in order]
            for candidate in missing:
                self._lose(candidate)
                if not self._adopt(candidate, order):
                    self._create(candidate)
            if missing:
                continue
            # 2. The lowest node leads; every other candidate watches its predecessor only.
            stable = True
            for candidate in self._candidates.values():
                assert candidate.node is not None
                index = order.index(candidate.node)
                if index == 0:
                    # Watch our own node too: deleted behind our back (by hand, by a tool),
                    # the watch re-evaluates at once and step 1 loses and re-enters; without
                    # it the leader would go on leading while the next node took over.
                    own = f"{self.path}/{candidate.node}"
                    if self._session.read(client.exists_async, own, watch=self._on_watch) is None:
                        stable = False
                        break
                    self._confirm(candidate, generation, started)
                    continue
                if candidate.leading:  # only a sequence wrap-around could put a node below ours
                    candidate.leading = False
                    self._record_candidate(Event.LOST, candidate)
                predecessor = f"{self.path}/{order[index - 1]}"
                if self._session.read(client.exists_async, predecessor, watch=self._on_watch) is None:
                    stable = False  # it left between the two reads
                    break
            if not stable:
                continue
            # 3. Listeners: watch the lowest node (or the parent while there is none).
            if self._listeners and not self._observe(order, notify):
                continue
            return
        raise ConnectionLoss("election kept changing while evaluating it")

    def _confirm(self, candidate: _Candidate, generation: int, started: float) -> None:
        if candidate.leading and candidate.confirmed == generation:
            return
        event = Event.RENEWED if candidate.leading else Event.ACQUIRED
        candidate.leading = True
        candidate.confirmed = generation
        # ``sent`` on the wall clock as it reads now, as ``ts`` is: the node may have been
        # created long ago, and a step of the wall clock since must not move it past this.
        sent = None
        if event == Event.ACQUIRED and candidate.created is not None:
            sent = time.time() - (time.monotonic() - candidate.created)
        self._record_candidate(event, candidate, valid_until=started + self._session.session_timeout, sent=sent)

    def _lose(self, candidate: _Candidate) -> None:
        if candidate.leading:
            candidate.leading = False
            self._record_candidate(Event.LOST, candidate, valid_until=self._ended(candidate))
        candidate.node = None

    def _ended(self, candidate: _Candidate) -> float:
        """When its leadership ended (wall clock): now, or earlier when the proven life of the
        session, as the connection it was confirmed on proved it, ran out first (a pause):
        the term ends there, not at this late event. Answers on a later connection or a new
        session prove nothing about it."""
        now = time.monotonic()
        return time.time() - max(0.0, now - self._session.alive_until_in(candidate.confirmed))

    def _record_end(self, candidate: _Candidate, proven: bool, ended: float) -> None:
        """A leader's resign or close, ``ended`` when it stopped believing it leads (before
        its delete was sent): ``resigned`` while its leadership was proven, else ``lost``
        (resumed from a pause, it may resign before kazoo has noticed that its session
        expired, and its successor may have led since). Either carries ``ended`` as
        valid_until, which the pipeline takes as the end of the term."""
        self._record_candidate(Event.RESIGNED if proven else Event.LOST, candidate, valid_until=ended)

    def _observe(self, order: list[str], notify: bool) -> bool:
        """Update the listeners' view; False if the election changed under us (read again)."""
        client = self._session.client
        if order:
            lowest = f"{self.path}/{order[0]}"
            if self._session.read(client.exists_async, lowest, watch=self._on_watch) is None:
                return False
            leader_id, _, epoch = self._identify(order[0])
        else:
            if contenders(read_children(self._session, self.path, watch=self._on_watch)):
                return False
            leader_id, epoch = None, 0
        self._set_view(leader_id, epoch, notify)
        return True

    def _set_view(self, leader_id: str | None, epoch: int, notify: bool) -> None:
        if leader_id == self._view:
            return
        self._view = leader_id
        if notify:
            self._dispatcher.notify(self._listeners, leader_id)
        if leader_id is not None and leader_id not in self._candidates:
            self._record(Event.OBSERVED, member=leader_id, epoch=epoch)

    def _on_state(self, state: str) -> None:
        with self._lock:
            if self._closed:
                return
            if state == CONNECTED:
                self._evaluate_or_retry()
                return
            if state == LOST:  # the session's ephemeral nodes are gone
                for candidate in self._candidates.values():
                    self._lose(candidate)
            if self._listeners:  # SUSPENDED or LOST: the leader is not known any more
                self._set_view(None, 0, notify=True)

    def _record_candidate(
        self, event: str, candidate: _Candidate, valid_until: float | None = None, sent: float | None = None
    ) -> None:
        """The history event and the client metrics of a change of one candidate's leadership."""
        self._record(event, member=candidate.id, epoch=candidate.epoch, valid_until=valid_until, sent=sent)
        if event == Event.ACQUIRED:
            self._leadership(candidate.id, True)
        elif event in TERM_ENDS:
            self._leadership(candidate.id, False)
