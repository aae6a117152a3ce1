"""Group membership with one ephemeral znode per member: /CHROOT/groups/GROUP/ID.

Status: the ZooKeeper recipe (kazoo's Party, with ids as node names). Usage::

    grp = coord.group_membership("workers")
    grp.join("w1", data="host=10.0.0.7")

The node name is the member id, encoded reversibly to a legal znode name
(kubecoord.backends.zookeeper.naming); the node's data is the member data. A live member
is a node that exists: it goes with leave(), close(), or the expiry of the session that
created it. ZooKeeper's create-if-absent makes ids unique (NodeExists ->
MemberExistsError). Listeners follow the children of the group node (level-triggered).

Guarantees: after a session loss (LOST) the members this handle joined are recorded as
"expired" and, once kazoo has a new session, re-join with the same id and data (unless
another session took the id meanwhile: then the member is dropped and a warning logged).
A join whose create got no answer finds its node by name; when it cannot look it up either,
join() raises OutcomeUnknownError (the member may be in the group for the rest of the
session) and the handle remembers the id: leave() or close() deletes the node if this
session holds it, and join() again finds it and joins.

Not guaranteed: that a member is never absent — between the expiry of the old session
and the re-join, other members see it gone.
"""

from __future__ import annotations

import contextlib
import logging

from kazoo.exceptions import ConnectionLoss, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kubecoord._core.handles import GroupHandle
from kubecoord.backends.zookeeper.context import ZooKeeperContext
from kubecoord.backends.zookeeper.errors import translating
from kubecoord.backends.zookeeper.handle import ZooKeeperHandle
from kubecoord.backends.zookeeper.naming import decode_name, encode_name
from kubecoord.backends.zookeeper.session import CONNECTED, LOST
from kubecoord.backends.zookeeper.watches import Watch, WatchFn, read_children
from kubecoord.errors import MemberExistsError, MemberNotFoundError, OutcomeUnknownError
from kubecoord.wire.events import Event

log = logging.getLogger("kubecoord.zookeeper")


class _CreateUnresolved(KazooException):  # type: ignore[misc]  # kazoo is untyped
    """A member's create was sent, its answer never came, and its node could not be looked up."""


class ZooKeeperGroup(ZooKeeperHandle, GroupHandle):
    folder = "groups"

    def __init__(self, context: ZooKeeperContext, group: str) -> None:
        super().__init__(context, group)
        self._mine: dict[str, str] = {}
        self._unresolved: dict[str, int] = {}
        """Ids whose join raised OutcomeUnknownError -> the session the create was sent on."""
        self._watch: Watch[frozenset[str]] | None = None
        self._session.subscribe(self._on_state)

    def _join(self, member_id: str, data: str) -> None:
        with self._lock, translating():
            if member_id in self._mine:
                raise MemberExistsError(f"member {member_id!r} already joined group {self.group!r} on this handle")
            owner = self._session.last_session_id
            try:
                created = self._create(member_id, data)
            except _CreateUnresolved as exc:
                if owner is not None:
                    self._unresolved[member_id] = owner  # leave() and close() withdraw it
                raise OutcomeUnknownError(
                    f"zookeeper group {self.group!r}: the join of {member_id!r} got no answer and its node could "
                    f"not be looked up ({exc}); it may be in the group: leave() or close() withdraws it, join() "
                    "again finds it"
                ) from None
            if not created:
                raise MemberExistsError(f"member {member_id!r} is already in group {self.group!r}")
            self._unresolved.pop(member_id, None)
            self._mine[member_id] = data
        self._record_member(Event.JOINED, member_id)

    def _leave(self, member_id: str) -> None:
        with self._lock, translating():
            if member_id not in self._mine:
                if member_id in self._unresolved:
                    self._withdraw_unresolved(member_id)
                    return
                raise MemberNotFoundError(f"member {member_id!r} was not joined through this handle")
            self._delete(member_id)
            del self._mine[member_id]
        self._record_member(Event.LEFT, member_id)

    def _membership_list(self) -> set[str]:
        with translating():
            return {decode_name(name) for name in read_children(self._session, self.path)}

    def _membership(self) -> dict[str, str]:
        client = self._session.client
        with translating():
            names = read_children(self._session, self.path)
            # One round trip for all members: send every get, then collect.
            pending = [(name, client.get_async(f"{self.path}/{name}")) for name in names]
            members = {}
            for name, result in pending:
                try:
                    raw, _ = result.get(timeout=self._session.options.request_timeout)
                except NoNodeError:
                    continue  # left while we read
                members[decode_name(name)] = raw.decode("utf-8")
            return members

    def _listener_added(self, first: bool) -> None:
        self._check_open()
        with self._lock:
            if self._watch is None:
                watch: Watch[frozenset[str]] = Watch(
                    self._session, self._read_members, lambda ids: self._dispatcher.notify(self._listeners, set(ids))
                )
                watch.start()
                self._watch = watch

    def close(self) -> None:
        self._close_session_bound(self._on_state, self._release_members)

    def _release_members(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        for member_id in self._mine:
            self._delete_on_close(self._node(member_id))
            self._record_member(Event.LEFT, member_id)
        self._mine.clear()
        for member_id in list(self._unresolved):
            try:
                self._withdraw_unresolved(member_id)
            except (KazooException, KazooTimeoutError):
                log.warning("could not withdraw a member whose join got no answer; it goes with the session",
                            extra={"group": self.group, "member": member_id})
        self._unresolved.clear()

    # -- znodes ---------------------------------------------------------------------
    def _node(self, member_id: str) -> str:
        return f"{self.path}/{encode_name(member_id)}"

    def _read_members(self, watch: WatchFn) -> frozenset[str]:
        return frozenset(decode_name(name) for name in read_children(self._session, self.path, watch))

    def _owned(self, member_id: str) -> bool:
        stat = self._session.read(self._session.client.exists_async, self._node(member_id))
        return stat is not None and stat.ephemeralOwner == self._session.session_id

    def _create(self, member_id: str, data: str) -> bool:
        """Create the member's node; False if another session holds the id."""
        if not self._session.connected:
            raise ConnectionLoss("not connected to ZooKeeper")  # nothing sent
        try:
            self._session.call(
                self._session.client.create_async, self._node(member_id), data.encode("utf-8"),
                ephemeral=True, makepath=True,
            )
        except NodeExistsError:
            return self._owned(member_id)
        except (ConnectionLoss, KazooTimeoutError):
            # Sent (a call while not connected raised before): it may have happened before
            # the connection broke or the answer was late.
            try:
                owned = self._owned(member_id)
            except (KazooException, KazooTimeoutError) as exc:
                raise _CreateUnresolved(repr(exc)) from exc
            if not owned:
                raise
        return True

    def _withdraw_unresolved(self, member_id: str) -> None:
        """Delete the node a join with an unknown outcome may have made, if the session it was
        sent on holds it (a later session never had it); then forget the id. Raises, keeping
        the id, when ZooKeeper cannot be asked."""
        owner = self._unresolved[member_id]
        if not self._session.connected:
            raise ConnectionLoss("not connected to ZooKeeper")  # the session may still hold it
        if self._session.session_id == owner:
            stat = self._session.read(self._session.client.exists_async, self._node(member_id))
            if stat is not None and stat.ephemeralOwner == owner:
                self._delete(member_id)
        del self._unresolved[member_id]

    def _delete(self, member_id: str) -> None:
        with contextlib.suppress(NoNodeError):
            self._session.call(self._session.client.delete_async, self._node(member_id))

    # -- session loss -----------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        with self._lock:
            if self._closed:
                return
            if state == LOST:
                for member_id in self._mine:
                    self._record_member(Event.EXPIRED, member_id)
            elif state == CONNECTED:
                self._rejoin()

    def _rejoin(self) -> None:
        """Re-create the nodes of members whose node went with an old session."""
        if not self._session.connected:
            return
        try:
            for member_id, data in list(self._mine.items()):
                if self._owned(member_id):
                    continue
                if self._create(member_id, data):
                    self._record_member(Event.JOINED, member_id)
                else:
                    log.warning("member id taken by another session after session loss; dropped",
                                extra={"group": self.group, "member": member_id})
                    del self._mine[member_id]
        except (KazooException, KazooTimeoutError) as exc:
            log.debug("re-join failed; retrying", extra={"group": self.group, "error": repr(exc)})
            self._retry_later(self, self._rejoin_locked)

    def _rejoin_locked(self) -> None:
        with self._lock:
            if not self._closed:
                self._rejoin()

    def _record_member(self, event: str, member_id: str) -> None:
        self._record(event, member=member_id)
