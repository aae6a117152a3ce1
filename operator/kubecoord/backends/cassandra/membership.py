"""Group membership on cassandra://: one row per member, with a TTL, renewed by heartbeat.

Layout::

    group_members (grp text, member text, data text, session uuid, nonce uuid,
                   PRIMARY KEY ((grp), member))

A member is a live row: join() inserts it ``IF NOT EXISTS ... USING TTL lease_duration``
(MemberExistsError when another session holds the id); a heartbeat every third of the TTL
rewrites it ``IF session = ours``; leave() and close() delete it ``IF session = ours``. A
crashed member's row vanishes ``lease_duration`` (less the TTL's one-second granularity)
after its last heartbeat, and watchers see it gone at their next poll.

Listeners: the handle reads the group's partition (one read: the member ids) every
``poll_period`` and tells its listeners when the set changed, expiry included.

Guarantees: a heartbeat never resurrects a row that expired or that another session took
(it is an LWT on the session); a member whose heartbeat finds its row gone is recorded as
``expired`` and joins again with the same id and data (unless another session took the id
meanwhile: then it is dropped and a warning logged), as on ZooKeeper. Not guaranteed: that
a member is never absent — a member whose heartbeats fail for a TTL is gone for the others.
"""

from __future__ import annotations

import logging
import threading
import uuid

from kubecoord._core.handles import GroupHandle
from kubecoord._core.lease import Loop
from kubecoord.backends.cassandra.context import CassandraContext
from kubecoord.errors import CoordinationError, MemberExistsError, MemberNotFoundError
from kubecoord.wire.events import Event

log = logging.getLogger("kubecoord.cassandra")

_JOIN = (
    "INSERT INTO {ks}.group_members (grp, member, data, session, nonce) VALUES (?, ?, ?, ?, ?) "
    "IF NOT EXISTS USING TTL ?"
)
_HEARTBEAT = (
    "UPDATE {ks}.group_members USING TTL ? SET data = ?, nonce = ? WHERE grp = ? AND member = ? IF session = ?"
)
_LEAVE = "DELETE FROM {ks}.group_members WHERE grp = ? AND member = ? IF session = ?"
_READ_ONE = "SELECT session, nonce FROM {ks}.group_members WHERE grp = ? AND member = ?"
_READ_ALL = "SELECT member, data FROM {ks}.group_members WHERE grp = ?"


class CassandraGroup(GroupHandle):
    def __init__(self, context: CassandraContext, group: str) -> None:
        super().__init__(context, group, context.events)
        self._context = context
        self._session = context.session
        self._session_id = context.session_id
        self._ttl = context.options.lease_duration
        self._lock = threading.RLock()
        self._mine: dict[str, str] = {}
        self._heartbeat: Loop | None = None
        self._poller: Loop | None = None
        self._seen: frozenset[str] | None = None

    # -- the interface ------------------------------------------------------------------
    def _join(self, member_id: str, data: str) -> None:
        with self._lock:
            if member_id in self._mine:
                raise MemberExistsError(f"member {member_id!r} already joined group {self.group!r} on this handle")
            if not self._insert(member_id, data):
                raise MemberExistsError(f"member {member_id!r} is already in group {self.group!r}")
            self._mine[member_id] = data
            if self._heartbeat is None:
                self._heartbeat = Loop(f"kubecoord-cassandra-heartbeat-{self.group}", self._beat)
                self._heartbeat.start()
        self._record(Event.JOINED, member=member_id)

    def _leave(self, member_id: str) -> None:
        with self._lock:
            if member_id not in self._mine:
                raise MemberNotFoundError(f"member {member_id!r} was not joined through this handle")
            self._delete(member_id)
            del self._mine[member_id]
        self._record(Event.LEFT, member=member_id)

    def _membership(self) -> dict[str, str]:
        rows = self._session.execute(_READ_ALL, [self.group])
        return {row.member: row.data or "" for row in rows}

    def _membership_list(self) -> set[str]:
        return set(self._membership())

    def _listener_added(self, first: bool) -> None:
        self._check_open()
        with self._lock:
            if self._poller is not None:
                return
            self._seen = frozenset(self._membership())
            self._poller = Loop(f"kubecoord-cassandra-group-{self.group}", self._poll)
            self._poller.start()

    # -- rows -----------------------------------------------------------------------------
    def _insert(self, member_id: str, data: str) -> bool:
        """Insert the member's row; False if another session holds the id."""
        nonce = uuid.uuid4()
        result = self._session.cas(
            _JOIN, [self.group, member_id, data, self._session_id, nonce, self._ttl],
            resolve=lambda: self._nonce_is(member_id, nonce),
        )
        if result.applied:
            return True
        return result.existing is not None and result.existing.get("session") == self._session_id

    def _delete(self, member_id: str) -> None:
        self._session.cas(_LEAVE, [self.group, member_id, self._session_id], resolve=lambda: True)

    def _nonce_is(self, member_id: str, nonce: uuid.UUID) -> bool:
        rows = self._session.execute(_READ_ONE, [self.group, member_id], serial=True)
        return bool(rows) and rows[0].nonce == nonce

    # -- background -----------------------------------------------------------------------
    def _beat(self) -> float:
        period = self._context.options.heartbeat_period
        with self._lock:
            if self._closed:
                return period
            mine = dict(self._mine)
        for member_id, data in mine.items():
            nonce = uuid.uuid4()
            try:
                renewed = self._session.cas(
                    _HEARTBEAT, [self._ttl, data, nonce, self.group, member_id, self._session_id],
                    resolve=lambda m=member_id, n=nonce: self._nonce_is(m, n),  # type: ignore[misc]
                    timeout=period,
                )
                if not renewed.applied:
                    self._rejoin(member_id, data)
            except CoordinationError as exc:
                log.info("heartbeat failed", extra={"group": self.group, "member": member_id, "error": str(exc)})
        return period

    def _rejoin(self, member_id: str, data: str) -> None:
        with self._lock:
            if self._closed or member_id not in self._mine:
                return
            self._record(Event.EXPIRED, member=member_id)
            if self._insert(member_id, data):
                self._record(Event.JOINED, member=member_id)
            else:
                log.warning("member id taken by another session after expiry; dropped",
                            extra={"group": self.group, "member": member_id})
                del self._mine[member_id]

    def _poll(self) -> float:
        period = self._context.options.poll_period
        if self._closed:
            return period
        try:
            members = frozenset(self._membership())
        except CoordinationError as exc:
            log.debug("group poll failed", extra={"group": self.group, "error": str(exc)})
            return period
        if members != self._seen:
            self._seen = members
            self._context.dispatcher.notify(self._listeners, set(members))
        return period

    # -- lifecycle ------------------------------------------------------------------------
    def _stop_loops(self) -> None:
        with self._lock:
            loops = [loop for loop in (self._heartbeat, self._poller) if loop is not None]
            self._heartbeat = self._poller = None
        for loop in loops:
            loop.stop()

    def close(self) -> None:
        if self._closed:
            return
        self._stop_loops()
        with self._lock:
            self._closed = True
            for member_id in list(self._mine):
                try:
                    self._delete(member_id)
                except CoordinationError as exc:  # unreachable: the row expires by its TTL
                    log.info("leave on close failed", extra={"group": self.group, "error": str(exc)})
                self._record(Event.LEFT, member=member_id)
            self._mine.clear()
        super().close()

    def crash(self) -> None:
        self._closed = True
        self._stop_loops()
