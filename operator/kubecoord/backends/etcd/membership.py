"""Group membership with one key per member on the coordinator's lease:
``PREFIX/_kubecoord/groups/GROUP/ID``.

Status: kubecoord's own layout. Usage::

    grp = coord.group_membership("workers")
    grp.join("w1", data="host=10.0.0.7")

A live member is a key that exists: it goes with leave(), close(), or the expiry of the
lease it is attached to. join() puts the key if absent (MemberExistsError otherwise); the
value is ``TOKEN\\nDATA`` with a token unique to the join, so a join whose answer was lost
is sent again safely and recognised as its own. Listeners follow a watch of the group's
prefix (watches.py), level-triggered.

Guarantees: after the lease expired (session.py grants a new one) the members this handle
joined are recorded as "expired" and re-join with the same id and data, unless another
process took the id meanwhile (then the member is dropped with a warning). Not guaranteed:
that a member is never absent between its lease's expiry and the re-join. A leave() that
raised leaves the member joined on the handle (its key may still be there): it can be
sent again, and close() sends it.
"""

from __future__ import annotations

import logging
import threading
import uuid

from kubecoord._core.handles import GroupHandle
from kubecoord.backends.etcd import txn
from kubecoord.backends.etcd.context import EtcdContext
from kubecoord.backends.etcd.errors import translating
from kubecoord.backends.etcd.transport import b64
from kubecoord.backends.etcd.watches import Entry, PrefixView, read_prefix
from kubecoord.errors import CoordinationError, MemberExistsError, MemberNotFoundError
from kubecoord.wire.events import Event

log = logging.getLogger("kubecoord.etcd")


def _data(entry: Entry) -> str:
    return entry.value.decode("utf-8", errors="replace").partition("\n")[2]


class EtcdGroup(GroupHandle):
    def __init__(self, context: EtcdContext, group: str) -> None:
        super().__init__(context, group, context.events)
        self.group = group
        self._context = context
        self._prefix = context.internal("groups", group) + "/"
        self._lock = threading.Lock()
        self._joined: dict[str, str] = {}
        """member id -> its data, for the members this handle joined."""
        self._view: PrefixView | None = None
        self._last: set[str] | None = None
        context.session.subscribe(self._on_new_lease)

    def _key(self, member_id: str) -> str:
        return self._prefix + member_id

    def _join(self, member_id: str, data: str) -> None:
        with self._lock:
            if member_id in self._joined:
                raise MemberExistsError(f"member {member_id!r} already joined group {self.group!r} on this handle")
        with translating():
            self._put(member_id, data)
        with self._lock:
            self._joined[member_id] = data
        self._record(Event.JOINED, member=member_id)

    def _put(self, member_id: str, data: str) -> None:
        key, lease = self._key(member_id), self._context.session.lease_id
        value = f"{uuid.uuid4().hex}\n{data}"
        answer = txn.run(self._context.transport, [txn.created(key, 0)], [txn.put(key, value, lease=lease)],
                         [txn.get(key)], idempotent=True)
        if answer.succeeded:
            return
        existing = answer.read(0)
        if existing is None or existing.value != value.encode():
            raise MemberExistsError(f"a live member of group {self.group!r} already has the id {member_id!r}")

    def _leave(self, member_id: str) -> None:
        with self._lock:
            if member_id not in self._joined:
                raise MemberNotFoundError(f"member {member_id!r} did not join group {self.group!r} on this handle")
            data = self._joined.pop(member_id)
        try:
            with translating():
                self._context.transport.call("kv/deleterange", {"key": b64(self._key(member_id))}, idempotent=True)
        except BaseException:
            # Its key may still be there, on a lease kept alive: it stays joined on this
            # handle, so the leave can be sent again (and close() sends it).
            with self._lock:
                self._joined.setdefault(member_id, data)
            raise
        self._record(Event.LEFT, member=member_id)

    def _membership(self) -> dict[str, str]:
        with translating():
            entries, _ = read_prefix(self._context.transport, self._prefix)
        return {key[len(self._prefix):]: _data(entry) for key, entry in entries.items()}

    # -- listeners -----------------------------------------------------------------------------
    def _listener_added(self, first: bool) -> None:
        if self._closed:
            return
        with self._lock:
            if self._view is None:
                self._view = self._context.watch_prefix(self._prefix, self._changed, f"group-{self.group}")
            view = self._view
        view.wait_for(1, self._context.options.request_timeout)

    def _changed(self, view: PrefixView) -> None:
        if self._closed:
            return
        members = {key[len(self._prefix):] for key in view.entries()}
        with self._lock:
            if members == self._last:
                return
            self._last = members
        self._context.dispatcher.notify(self._listeners, members)

    def _on_new_lease(self, lease: int) -> None:
        with self._lock:
            joined = dict(self._joined)
        for member_id, data in joined.items():
            self._record(Event.EXPIRED, member=member_id)
            try:
                with translating():
                    self._put(member_id, data)
                self._record(Event.JOINED, member=member_id)
            except CoordinationError as exc:
                log.warning("etcd member could not re-join", extra={"group": self.group, "member": member_id,
                                                                  "error": str(exc)})
                with self._lock:
                    self._joined.pop(member_id, None)

    # -- lifecycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        with self._lock:
            joined = list(self._joined)
        for member_id in joined:
            try:
                self._leave(member_id)
            except CoordinationError as exc:
                log.info("etcd member not deleted; it goes with the lease", extra={"error": str(exc)})
        self._closed = True
        self._stop()

    def crash(self) -> None:
        self._closed = True
        self._stop()

    def _stop(self) -> None:
        self._context.session.unsubscribe(self._on_new_lease)
        with self._lock:
            view, self._view = self._view, None
        if view is not None:
            view.stop()
