"""Storage and ListenerRegistry on cassandra://: one partition per store, one row per key,
versions by LWT, a change marker polled by listeners.

Layout::

    kv_entries (store text, key text, value text, version bigint, nonce uuid, created uuid,
                changed uuid STATIC, incarnation uuid STATIC, fences map<text, bigint> STATIC,
                PRIMARY KEY ((store), key))

Every write is one LWT on the store's partition: put ``IF version = null`` (create-only;
KeyExistsError), update and delete ``IF version = V`` (V the caller's expected_version,
or the version just read: a plain update() retries on a concurrent write, one with
expected_version raises VersionConflictError). Each write also sets the partition's
static ``changed`` marker to its own nonce, so a listener learns of any write in the store
from one small read. ``children(namespace)`` reads the keys under ``namespace/`` (a
clustering-range read) and returns their first path segments.

Key incarnations: a put sets the row's ``created`` to its own nonce and updates leave it
as it is, so ``created`` names the incarnation of the key (a key deleted and put again is a
new one) that every later version belongs to (schema version 3; a row written before
has none, null: its incarnation is unknown).

Fenced writes (``fence=Fence(name, token)``): the static ``fences map<text, bigint>`` holds
the highest token accepted per domain (schema version 2). A fenced write is the same LWT
with one more condition, ``fences[name] = <the mark read>`` (null when none), and one more
assignment, ``fences[name] = token``: the mark and the key change together or not at all.

Store incarnation: the static ``incarnation`` is set by the first put() into an empty
partition (``IF incarnation = null``) and carried by every later write's condition; a store
deleted behind its clients' backs (its partition deleted) starts again empty, and the next
put() gives it a new incarnation, logged with every write as ``store_incarnation`` (the
pipeline judges versions per incarnation).

Consistency: reads (fetch, children, listener polls) at ``consistency`` (QUORUM): they see
every acknowledged write. Writes: Paxos at ``serial_consistency``, commit at
``consistency``; an unknown outcome is resolved by a SERIAL read of the key: landed when
it holds the write's nonce; not landed when nobody wrote it since (an update: the nonce
written over is still there; a delete: the version is) or another writer took the very
version the write was conditional on (an update: theirs is one version on, of the key's
incarnation the update was sent against; a put: theirs
is version 1; a fenced put: the key absent and the store's change marker still the one
read before it); anything else — the key moved further, so the write may have landed and
been overwritten — is OutcomeUnknownError (a delete's: by the store's change marker). A
write that did not land is judged again from the key as it is then (a fence, a conflict,
a missing key, or the write sent again), never from the answer row it never got.
All keys of a store share one Paxos partition, so writes to one store are serialised (a
coordination store's traffic, not a database's); different stores are independent.

Listeners: each registry handle reads its store's ``changed`` marker every
``poll_period``; when it moved, it re-reads the watched keys (one read) and, if key sets
are watched, the store's keys (one read), and calls the listeners whose value or key set
changed. Changes between two polls coalesce; the poll period bounds the latency.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from kubecoord import validation
from kubecoord._core.handles import ReadingRegistryHandle, StorageHandle
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.api import Fence, Versioned
from kubecoord.backends.cassandra.context import CassandraContext
from kubecoord.backends.cassandra.poller import Poller
from kubecoord.backends.cassandra.session import CasResult
from kubecoord.errors import (
    CoordinationError,
    KeyExistsError,
    KeyNotFoundError,
    OutcomeUnknownError,
    VersionConflictError,
)
from kubecoord.wire import fences
from kubecoord.wire.events import Event

log = logging.getLogger("kubecoord.cassandra")
_FENCED_ROUNDS = 50
"""Read-LWT rounds a fenced write retries while other writers move the mark or the key."""

_READ = "SELECT value, version, nonce, created, incarnation FROM {ks}.kv_entries WHERE store = ? AND key = ?"
_READ_KEYS = "SELECT key, value, version FROM {ks}.kv_entries WHERE store = ? AND key IN ?"
_READ_INCARNATION = "SELECT incarnation FROM {ks}.kv_entries WHERE store = ? LIMIT 1"
_READ_MARKER = "SELECT changed, incarnation FROM {ks}.kv_entries WHERE store = ? LIMIT 1"
_ALL_KEYS = "SELECT key FROM {ks}.kv_entries WHERE store = ?"
_KEYS_UNDER = "SELECT key FROM {ks}.kv_entries WHERE store = ? AND key > ? AND key < ?"
_PUT_NEW_STORE = (
    "UPDATE {ks}.kv_entries SET value = ?, version = 1, nonce = ?, created = ?, changed = ?, incarnation = ? "
    "WHERE store = ? AND key = ? IF version = null AND incarnation = null"
)
_PUT = (
    "UPDATE {ks}.kv_entries SET value = ?, version = 1, nonce = ?, created = ?, changed = ? "
    "WHERE store = ? AND key = ? IF version = null AND incarnation = ?"
)
_UPDATE = (
    "UPDATE {ks}.kv_entries SET value = ?, version = ?, nonce = ?, changed = ? "
    "WHERE store = ? AND key = ? IF version = ?"
)
_READ_FENCE = "SELECT incarnation, fences, changed FROM {ks}.kv_entries WHERE store = ? LIMIT 1"
# Fenced writes: the key's usual condition AND the domain's mark as read (null: none yet);
# the mark is set to the write's token in the same LWT (kubecoord.wire.fences).
_FENCED_PUT_NEW_STORE = (
    "UPDATE {ks}.kv_entries SET value = ?, version = 1, nonce = ?, created = ?, changed = ?, incarnation = ?, "
    "fences[?] = ? "
    "WHERE store = ? AND key = ? IF version = null AND incarnation = null"
)
_FENCED_PUT = (
    "UPDATE {ks}.kv_entries SET value = ?, version = 1, nonce = ?, created = ?, changed = ?, fences[?] = ? "
    "WHERE store = ? AND key = ? IF version = null AND incarnation = ? AND fences[?] = ?"
)
_FENCED_UPDATE = (
    "UPDATE {ks}.kv_entries SET value = ?, version = ?, nonce = ?, changed = ?, fences[?] = ? "
    "WHERE store = ? AND key = ? IF version = ? AND fences[?] = ?"
)
_FENCED_DELETE = (
    "BEGIN BATCH "
    "DELETE FROM {ks}.kv_entries WHERE store = ? AND key = ? IF version = ? AND fences[?] = ? "
    "UPDATE {ks}.kv_entries SET changed = ?, fences[?] = ? WHERE store = ? "
    "APPLY BATCH"
)
_DELETE = (
    "BEGIN BATCH "
    "DELETE FROM {ks}.kv_entries WHERE store = ? AND key = ? IF version = ? "
    "UPDATE {ks}.kv_entries SET changed = ? WHERE store = ? "
    "APPLY BATCH"
)


_UNREAD = object()
"""_put_landed's ``changed`` when the store's change marker was not read before the put."""


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def _failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


class CassandraStorage(StorageHandle):
    def __init__(self, context: CassandraContext, name: str) -> None:
        super().__init__(context, name, context.events)
        self._session = context.session
        self.max_value_bytes = context.options.max_value_bytes
        self._incarnation: uuid.UUID | None = None

    # -- reads ----------------------------------------------------------------------------
    def _fetch_versioned(self, key: str) -> Future[Versioned | None]:
        try:
            rows = self._session.execute(_READ, [self.name, key])
        except CoordinationError as exc:
            return _failed(exc)
        if not rows or rows[0].version is None:
            return _done(None)
        return _done(Versioned(rows[0].value or "", rows[0].version))

    def _children(self, namespace: str) -> set[str]:
        if namespace == "":
            keys = [row.key for row in self._session.execute(_ALL_KEYS, [self.name]) if row.key is not None]
        else:
            # Every key below namespace/ sorts between "namespace/" and "namespace0" ('0' follows '/').
            rows = self._session.execute(_KEYS_UNDER, [self.name, namespace + "/", namespace + "0"])
            keys = [row.key for row in rows]
        names = (validation.child_name(namespace, key) for key in keys)
        return {name for name in names if name is not None}

    # -- writes ---------------------------------------------------------------------------
    def _put(self, key: str, data: str, fence: Fence | None) -> int:
        if fence is not None:
            return self._fenced_write(key, fence, data, None, put=True)
        sent = time.time()  # logged as ``sent``: the write happened between it and the event's ts
        for _ in range(5):
            incarnation = self._incarnation or self._read_incarnation()
            nonce = uuid.uuid4()
            if incarnation is None:
                incarnation = uuid.uuid4()
                result = self._session.cas(
                    _PUT_NEW_STORE, [data, nonce, nonce, nonce, incarnation, self.name, key],
                    resolve=lambda n=nonce: self._put_landed(key, n),  # type: ignore[misc]
                )
            else:
                result = self._session.cas(
                    _PUT, [data, nonce, nonce, nonce, self.name, key, incarnation],
                    resolve=lambda n=nonce: self._put_landed(key, n),  # type: ignore[misc]
                )
            if result.applied:
                self._incarnation = incarnation
                self._record(Event.PUT, key=key, version=1, sent=sent, store_incarnation=str(incarnation))
                return 1
            existing = result.existing or {}
            if existing.get("version") is not None:
                raise KeyExistsError(f"key {key!r} already exists (version {existing['version']})")
            # The store's incarnation is not the one we knew (deleted and maybe re-created): learn it.
            self._incarnation = existing.get("incarnation")
        raise CoordinationError(f"put of {key!r}: the store kept changing incarnation")

    def _current(self, key: str, expected_version: int | None) -> Any:
        """The key's row, checked against ``expected_version`` (a conflict is recorded)."""
        current = self._read_row(key)
        if current is None:
            raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
        if expected_version is not None and current.version != expected_version:
            self._record(Event.CONFLICT, key=key, version=expected_version)
            raise VersionConflictError(f"key {key!r} is at version {current.version}, not {expected_version}")
        return current

    def _refused(self, key: str, existing: Any, expected_version: int | None) -> None:
        """A conditional write the server refused, answering ``existing`` (the row it holds):
        KeyNotFoundError when the key is gone, VersionConflictError (recorded) when the caller
        asked for a version; else it returns and the caller reads again (it raced a writer)."""
        if existing.get("version") is None:
            raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
        if expected_version is not None:
            self._record(Event.CONFLICT, key=key, version=expected_version)
            raise VersionConflictError(f"key {key!r} is at version {existing['version']}, not {expected_version}")

    def _unfenced_write(self, key: str, expected_version: int | None, send: Callable[[Any], CasResult]) -> Any:
        """The read-LWT loop of a plain update or delete: reads the key's row (checked against
        ``expected_version``), sends ``send(row)`` (one LWT conditional on that row's version)
        and returns the row once an LWT applied. A refusal is judged by _refused (the key gone,
        a conflict); a plain write that raced another writer, or an unknown outcome that did
        not land (no answer row to judge by), is judged again from the key as it is then."""
        while True:
            current = self._current(key, expected_version)
            result = send(current)
            if result.applied:
                return current
            if result.existing is not None:
                self._refused(key, result.existing, expected_version)

    def _update(self, key: str, data: str, expected_version: int | None, fence: Fence | None) -> int:
        if fence is not None:
            return self._fenced_write(key, fence, data, expected_version)

        def send(current: Any) -> CasResult:
            nonce = uuid.uuid4()
            return self._session.cas(
                _UPDATE, [data, current.version + 1, nonce, nonce, self.name, key, current.version],
                resolve=lambda: self._update_landed(key, current, nonce),
            )

        sent = time.time()
        current = self._unfenced_write(key, expected_version, send)
        self._incarnation = current.incarnation
        self._record(Event.UPDATED, key=key, version=current.version + 1, sent=sent,
                     store_incarnation=_text(current.incarnation))
        return int(current.version + 1)

    def _delete(self, key: str, expected_version: int | None, fence: Fence | None) -> None:
        if fence is not None:
            self._fenced_write(key, fence, None, expected_version)
            return

        def send(current: Any) -> CasResult:
            marker = uuid.uuid4()
            return self._session.cas(
                _DELETE, [self.name, key, current.version, marker, self.name],
                resolve=lambda: self._delete_landed(key, current, marker),
            )

        sent = time.time()
        current = self._unfenced_write(key, expected_version, send)
        self._record(Event.DELETED, key=key, version=current.version, sent=sent,
                     store_incarnation=_text(current.incarnation))

    def _fenced_write(
        self, key: str, fence: Fence, data: str | None, expected_version: int | None, *, put: bool = False
    ) -> int:
        """A put (``put``), update (``data``) or delete (neither) of ``key`` under ``fence``: one
        LWT on the store's partition that compares the domain's mark (static ``fences``) with
        the one read and sets it to the token, together with the key's own condition."""
        where = f"store {self.name!r}"
        sent = time.time()
        for _ in range(_FENCED_ROUNDS):
            rows = self._session.execute(_READ_FENCE, [self.name], serial=True)
            incarnation = rows[0].incarnation if rows else None
            marks = dict(rows[0].fences or {}) if rows else {}
            changed = rows[0].changed if rows else None
            # The fence first: a stale holder learns nothing of the key.
            fences.admit(marks, fence.name, fence.token, where=where)
            mark = marks.get(fence.name)
            nonce = uuid.uuid4()
            if put:
                assert data is not None
                if incarnation is None:
                    incarnation = uuid.uuid4()
                    query, params = _FENCED_PUT_NEW_STORE, [
                        data, nonce, nonce, nonce, incarnation, fence.name, fence.token, self.name, key]
                else:
                    query, params = _FENCED_PUT, [
                        data, nonce, nonce, nonce, fence.name, fence.token, self.name, key, incarnation, fence.name,
                        mark]
                version = 0
            else:
                current = self._current(key, expected_version)
                version = current.version
                incarnation = current.incarnation
                if data is not None:
                    query, params = _FENCED_UPDATE, [
                        data, version + 1, nonce, nonce, fence.name, fence.token, self.name, key, version,
                        fence.name, mark]
                else:
                    query, params = _FENCED_DELETE, [
                        self.name, key, version, fence.name, mark, nonce, fence.name, fence.token, self.name]
            landed: Callable[[], bool]
            if put:
                landed = lambda n=nonce, c=changed: self._put_landed(key, n, c)  # type: ignore[misc]  # noqa: E731
            elif data is not None:
                landed = lambda c=current, n=nonce: self._update_landed(key, c, n)  # type: ignore[misc]  # noqa: E731
            else:
                landed = lambda c=current, m=nonce: self._delete_landed(key, c, m)  # type: ignore[misc]  # noqa: E731
            result = self._session.cas(query, params, resolve=landed)
            if result.applied:
                self._incarnation = incarnation
                event = Event.PUT if put else Event.UPDATED if data is not None else Event.DELETED
                written = 1 if put else version + 1 if data is not None else version
                self._record(event, key=key, version=written, sent=sent, store_incarnation=_text(incarnation))
                return int(written)
            existing = result.existing or {}
            if put and existing.get("version") is not None:
                fences.admit(dict(existing.get("fences") or {}), fence.name, fence.token, where=where)
                raise KeyExistsError(f"key {key!r} already exists (version {existing['version']})")
            if not put and expected_version is not None and existing.get("version") not in (None, version):
                fences.admit(dict(existing.get("fences") or {}), fence.name, fence.token, where=where)
                self._record(Event.CONFLICT, key=key, version=expected_version)
                raise VersionConflictError(f"key {key!r} is at version {existing['version']}, not {expected_version}")
            # The mark, the key or the store's incarnation moved meanwhile: read and judge again.
        raise CoordinationError(f"fenced write of {key!r}: the store kept changing under it")

    # -- helpers --------------------------------------------------------------------------
    def _read_row(self, key: str, *, serial: bool = False) -> Any | None:
        rows = self._session.execute(_READ, [self.name, key], serial=serial)
        return rows[0] if rows and rows[0].version is not None else None

    def _read_incarnation(self) -> uuid.UUID | None:
        rows = self._session.execute(_READ_INCARNATION, [self.name], serial=True)
        return rows[0].incarnation if rows else None

    def _put_landed(self, key: str, nonce: uuid.UUID, changed: Any = _UNREAD) -> bool:
        """After a put with an unknown outcome (a SERIAL read): True when the key holds this
        put's nonce; False when it is at version 1 of another writer (theirs came first: ours,
        conditional on no key, could not apply) or absent — when ``changed`` (the store's
        change marker read before the put) is given, absent only counts while that marker is
        unchanged (nothing written since: a delete after ours would have moved it). A key
        further on, with another writer's nonce, or gone after other writes, may have been
        ours: OutcomeUnknownError."""
        row = self._read_row(key, serial=True)
        if row is not None and row.nonce == nonce:
            return True
        if row is not None and row.version == 1:
            return False
        if row is None:
            if changed is _UNREAD:
                return False
            markers = self._session.execute(_READ_MARKER, [self.name], serial=True)
            if (markers[0].changed if markers else None) == changed:
                return False
        raise OutcomeUnknownError(
            f"put of {key!r} in store {self.name!r}: its outcome is unknown and the key was changed since"
        )

    def _update_landed(self, key: str, before: Any, nonce: uuid.UUID) -> bool:
        """After an update of the row ``before`` with an unknown outcome (a SERIAL read):
        True when the key holds this update's nonce; False when it still holds ``before``'s
        (nobody wrote) or another writer's at the very next version of ``before``'s
        incarnation (its ``created``: theirs took the version ours was conditional on, and
        that incarnation is still the key's, so ours could only have applied to it). Anything
        else — the key further on, gone, or at the next version of another incarnation (it
        was deleted and put again since: ours may have landed before), or of an unknown one
        (rows written before schema version 3) — may have been ours and overwritten since:
        OutcomeUnknownError (taking it for "not landed" sent the update again, applied twice,
        or answered a conditional write VersionConflictError or a fenced one FencedError
        although it was written)."""
        row = self._read_row(key, serial=True)
        if row is not None and row.nonce == nonce:
            return True
        if row is not None and row.nonce == before.nonce:
            return False
        if (row is not None and row.version == before.version + 1
                and before.created is not None and row.created == before.created):
            return False
        raise OutcomeUnknownError(
            f"update of {key!r} in store {self.name!r}: its outcome is unknown and the key was changed since"
        )

    def _delete_landed(self, key: str, before: Any, marker: uuid.UUID) -> bool:
        """After a delete of the row ``before`` with an unknown outcome (SERIAL reads): False
        while the key still holds ``before``'s write (its nonce: it did not land; a key put
        again since is at the same version with another nonce, and ours may have removed the
        one before it); True when that write is gone and the store's
        change marker is still this delete's (nothing was written after it, so it was ours
        that removed the key). Otherwise another writer changed the store after the version
        went, and whether ours or theirs removed it cannot be told: OutcomeUnknownError
        (taking "gone" for ours answered two deletes of one key both as done)."""
        row = self._read_row(key, serial=True)
        if row is not None and row.nonce == before.nonce:
            return False
        rows = self._session.execute(_READ_MARKER, [self.name], serial=True)
        if rows and rows[0].changed == marker:
            return True
        raise OutcomeUnknownError(
            f"delete of {key!r} in store {self.name!r}: its outcome is unknown and the key was changed since"
        )


def _text(value: uuid.UUID | None) -> str | None:
    return str(value) if value is not None else None


class CassandraListenerRegistry(ReadingRegistryHandle):
    def __init__(self, context: CassandraContext, name: str) -> None:
        super().__init__(context, name, context.events)
        self._context = context
        self._session = context.session
        self._poller = Poller(f"kubecoord-cassandra-kv-{name}", self._poll, closed=lambda: self._closed)
        self._marker: tuple[Any, Any] | None = None

    def _value_listener_added(self, key: str, listeners: ListenerSet[str | None], first: bool) -> None:
        if first:
            self._hear_value(key, self._read_values([key]).get(key, (None, None)))
        self._poller.ensure()

    def _key_set_listener_added(self, namespace: str, listeners: ListenerSet[set[str]], first: bool) -> None:
        if first:
            self._hear_key_set(namespace, _children(namespace, self._all_keys()))
        self._poller.ensure()

    def _read_values(self, keys: list[str]) -> dict[str, tuple[str | None, int | None]]:
        rows = self._session.execute(_READ_KEYS, [self.name, keys])
        return {row.key: (row.value, row.version) for row in rows if row.version is not None}

    def _all_keys(self) -> list[str]:
        # A partition whose keys were all deleted still has its static row (key null).
        return [row.key for row in self._session.execute(_ALL_KEYS, [self.name]) if row.key is not None]

    def _poll(self) -> float:
        period = self._context.options.poll_period
        if self._closed:
            return period
        try:
            self._poll_once()
        except CoordinationError as exc:
            log.debug("listener poll failed", extra={"store": self.name, "error": str(exc)})
        return period

    def _poll_once(self) -> None:
        rows = self._session.execute(_READ_MARKER, [self.name])
        marker = (rows[0].changed, rows[0].incarnation) if rows else (None, None)
        if marker == self._marker:
            return
        keys, namespaces = self._heard()
        values = self._read_values(keys) if keys else {}
        all_keys = self._all_keys() if namespaces else []
        self._marker = marker  # only once the reads behind it succeeded
        read = {key: values.get(key, (None, None)) for key in keys}  # (value, version); absent: (None, None)
        now = {key: (row, row[0]) for key, row in read.items()}  # the token: the whole row
        for listeners, heard in self._changes(now, {ns: _children(ns, all_keys) for ns in namespaces}):
            self._context.dispatcher.notify(listeners, heard)

    def close(self) -> None:
        if self._closed:
            return
        self._clear_listeners()
        self._poller.stop()
        super().close()

    def crash(self) -> None:
        self._closed = True
        self._poller.stop()


def _children(namespace: str, keys: list[str]) -> set[str]:
    names = (validation.child_name(namespace, key) for key in keys)
    return {name for name in names if name is not None}
