"""The key-value store: one persistent znode per key under /CHROOT/kv/STORE.

Status: stable layout. Usage::

    kv = coord.storage("topics")                      # /CHROOT/kv/topics
    kv.put("topics/orders/config", "partitions=3")    # /CHROOT/kv/topics/topics/orders/config

Each key segment is one znode name (encoded reversibly, see naming.py), so a namespace
is a znode and its key set is the znode's children. Znodes that exist only because keys
live below them are implicit parents: their data has no key header (record.py), fetch()
reports them absent, and deleting the last key below one removes it (and any now-empty
implicit parents above it; a concurrent write below makes that removal give way).

Guarantees:

- put() is create-if-absent, update()/delete() with expected_version are
  compare-and-set on ZooKeeper's dataVersion: nothing is written on a conflict.
- Versions: 1 after put, +1 per update (dataVersion mapped through the header's base).
- A value larger than ``max_value_bytes`` (jute.maxbuffer minus room for the path and
  header) raises ValueTooLargeError before any request.

- Every put/updated/deleted event carries ``store_incarnation``: the czxid of the store's
  root znode the write went to (incarnation.py). A store deleted behind its clients' backs
  is gone for them as a whole: fetch() returns None, update() and delete() raise
  KeyNotFoundError, and the next put() re-creates the root (a new incarnation) with the key
  at version 1 — as on kubernetes://, where the store's ConfigMap is re-created.

- Fenced writes (``fence=Fence(name, token)``): the store's root znode holds the highest
  token accepted per domain as its data (kubecoord.wire.fences, format 1). The write is one
  multi-op transaction: a check of the root's dataVersion (or a set of its data, when the
  mark rises) and the key's create/set/delete by its own version; a refused write writes
  nothing (a put's implicit parents made for it are pruned again).


Outcomes: every write request is sent once. One that ZooKeeper did not answer (the
connection lost after sending, the session expired or moved, no answer within
request_timeout) raises OutcomeUnknownError: it may have been applied, once. It is never
sent again — a repeat would answer NodeExists, BadVersion or NoNode for the caller's own
write. KeyExistsError, KeyNotFoundError, VersionConflictError and a plain
BackendUnavailableError (not connected: nothing sent) mean nothing was written.
Every call fails at once with BackendUnavailableError while the session is not connected
(SUSPENDED) rather than waiting for the reconnection.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from kazoo.exceptions import BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.protocol.states import ZnodeStat

from kubecoord import validation
from kubecoord._core.handles import RegistryHandle, StorageHandle
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.api import Fence, Versioned
from kubecoord.backends.zookeeper import record
from kubecoord.backends.zookeeper.context import ZooKeeperContext
from kubecoord.backends.zookeeper.errors import translate, translating
from kubecoord.backends.zookeeper.handle import ZooKeeperHandle
from kubecoord.backends.zookeeper.incarnation import RootIncarnation
from kubecoord.backends.zookeeper.naming import decode_name, key_path
from kubecoord.backends.zookeeper.watches import Watch, WatchFn, read_children, read_data
from kubecoord.errors import (
    BackendUnavailableError,
    CoordinationError,
    FencedError,
    KeyExistsError,
    KeyNotFoundError,
    VersionConflictError,
)
from kubecoord.wire import fences
from kubecoord.wire.events import Event

log = logging.getLogger("kubecoord.zookeeper.kv")

_MAX_ROUNDS = 50
"""Read-CAS rounds a write retries while implicit parents come and go under it."""


class ZooKeeperStorage(ZooKeeperHandle, StorageHandle):
    folder = "kv"

    def __init__(self, context: ZooKeeperContext, name: str) -> None:
        super().__init__(context, name)
        self.max_value_bytes = context.options.max_value_bytes
        self._incarnation = RootIncarnation(self._session, self.path)

    # -- reads ------------------------------------------------------------------------
    def _fetch(self, key: str) -> Future[str | None]:
        return self._read(key, lambda versioned: versioned.value if versioned else None)

    def _fetch_versioned(self, key: str) -> Future[Versioned | None]:
        return self._read(key, lambda versioned: versioned)

    def _read(self, key: str, convert: Callable[[Versioned | None], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        if not self._session.connected:
            # kazoo would queue the request until it reconnects, with no deadline: fail now.
            future.set_exception(BackendUnavailableError(f"not connected to ZooKeeper; cannot fetch {key!r}"))
            return future

        def complete(result: Any) -> None:  # kazoo's completion thread
            try:
                raw, stat = result.get_nowait()
            except NoNodeError:
                future.set_result(convert(None))
            except Exception as exc:
                future.set_exception(translate(exc))
            else:
                future.set_result(convert(record.decode(raw, stat)))

        self._session.client.get_async(key_path(self.path, key)).rawlink(complete)
        return future

    def _children(self, namespace: str) -> set[str]:
        with translating():
            return {decode_name(name) for name in read_children(self._session, key_path(self.path, namespace))}

    # -- writes -----------------------------------------------------------------------
    def _put(self, key: str, data: str, fence: Fence | None) -> int:
        sent = time.time()
        if fence is not None:
            _, czxid = self._fenced_write(key, fence, "put", data, None)
            return self._done(Event.PUT, key, 1, sent, czxid)
        path = key_path(self.path, key)
        client = self._session.client
        with translating():
            for _ in range(_MAX_ROUNDS):
                try:
                    _, stat = self._session.write(
                        client.create_async, path, record.encode(0, data), makepath=True, include_data=True
                    )
                    return self._done(Event.PUT, key, 1, sent, stat.czxid)
                except NoNodeError:
                    continue  # an implicit parent was pruned between makepath and create
                except NodeExistsError:
                    pass
                node = read_data(self._session, path)
                if node is None:
                    continue
                raw, stat = node
                if record.is_key(raw):
                    raise KeyExistsError(f"key {key!r} already exists in store {self.name!r}")
                try:  # an implicit parent becomes a key, starting at version 1
                    raw = record.encode(stat.version + 1, data)
                    stat = self._session.write(client.set_async, path, raw, version=stat.version)
                    return self._done(Event.PUT, key, 1, sent, stat.czxid)
                except (BadVersionError, NoNodeError):
                    continue
            raise ConnectionLoss(f"put of {key!r} kept racing with concurrent writes")

    def _update(self, key: str, data: str, expected_version: int | None, fence: Fence | None) -> int:
        sent = time.time()
        if fence is not None:
            version, czxid = self._fenced_write(key, fence, "update", data, expected_version)
            return self._done(Event.UPDATED, key, version + 1, sent, czxid)

        def write(path: str, raw: bytes, zk_version: int) -> ZnodeStat:
            return self._session.write(
                self._session.client.set_async, path, record.encode(record.base_of(raw), data), version=zk_version
            )

        version, stat = self._compare_and_set(key, expected_version, write)
        return self._done(Event.UPDATED, key, version + 1, sent, stat.czxid)

    def _delete(self, key: str, expected_version: int | None, fence: Fence | None) -> None:
        sent = time.time()
        client = self._session.client
        if fence is not None:
            version, czxid = self._fenced_write(key, fence, "delete", None, expected_version)
            self._prune_after_delete(key)
            self._done(Event.DELETED, key, version, sent, czxid)
            return

        def remove(path: str, raw: bytes, zk_version: int) -> ZnodeStat | None:
            try:
                self._session.write(client.delete_async, path, version=zk_version)
            except NotEmptyError:  # keys live below: it stays, as an implicit parent
                return self._session.write(client.set_async, path, b"", version=zk_version)
            return None

        version, stat = self._compare_and_set(key, expected_version, remove)
        self._prune_after_delete(key)
        self._done(Event.DELETED, key, version, sent, stat.czxid)

    def _prune_after_delete(self, key: str) -> None:
        """_prune, after an applied delete: a failure leaves a harmless implicit parent and
        must not report the delete as failed."""
        try:
            self._prune(key)
        except CoordinationError as exc:
            log.info("removing implicit parents after a delete failed", extra={"store": self.name, "error": str(exc)})

    def _compare_and_set(
        self, key: str, expected: int | None, write: Callable[[str, bytes, int], ZnodeStat | None]
    ) -> tuple[int, ZnodeStat]:
        """Read the key, check ``expected``, ``write`` with a CAS on dataVersion; the version
        written over and the key's stat: the one the write answered, else the one read."""
        path = key_path(self.path, key)
        with translating():
            for _ in range(_MAX_ROUNDS):
                node = read_data(self._session, path)
                current = record.decode(*node) if node is not None else None
                if node is None or current is None:
                    raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
                if expected is not None and current.version != expected:
                    self._conflict(key, expected, current.version)
                try:
                    written = write(path, node[0], node[1].version)
                    return current.version, written if written is not None else node[1]
                except BadVersionError:
                    if expected is not None:
                        self._conflict(key, expected, None)
                except NoNodeError:
                    raise KeyNotFoundError(f"key {key!r} was deleted concurrently") from None
            raise ConnectionLoss(f"write of {key!r} kept racing with concurrent writes")

    def _fenced_write(
        self, key: str, fence: Fence, op: str, data: str | None, expected: int | None
    ) -> tuple[int, int]:
        """A put, update or delete of ``key`` under ``fence``: one multi-op transaction that
        checks (or raises) the fencing mark in the store's root znode by its dataVersion and
        writes the key by its own. Returns the version written over (0 for a put) and the
        key's czxid."""
        client = self._session.client
        path = key_path(self.path, key)
        where = f"store {self.name!r} ({self.path})"
        with translating():
            made_parents = False
            for _ in range(_MAX_ROUNDS):
                root = read_data(self._session, self.path)
                if root is None:
                    if op == "put":  # a new store (or deleted behind our back): make the root
                        self._session.call(client.ensure_path_async, self.path)
                        continue
                    raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
                # The fence first: a stale holder learns nothing of the key.
                try:
                    marks = fences.admit(fences.decode(root[0], where=where), fence.name, fence.token, where=where)
                except FencedError:
                    if made_parents:  # a refused put leaves no implicit parents behind
                        self._prune(key)
                    raise
                if op == "put":  # the implicit parents, outside the transaction (again after a race)
                    self._session.call(client.ensure_path_async, posixpath.dirname(path))
                    made_parents = True
                node = read_data(self._session, path)
                current = record.decode(*node) if node is not None else None
                transaction = client.transaction()
                if marks is None:
                    transaction.check(self.path, root[1].version)
                else:
                    transaction.set_data(self.path, fences.encode(marks).encode("utf-8"), root[1].version)
                if op == "put":
                    assert data is not None
                    if current is not None:
                        raise KeyExistsError(f"key {key!r} already exists in store {self.name!r}")
                    if node is None:
                        transaction.create(path, record.encode(0, data))
                    else:  # an implicit parent becomes a key, starting at version 1
                        transaction.set_data(path, record.encode(node[1].version + 1, data), node[1].version)
                    version = 0
                else:
                    if node is None or current is None:
                        raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
                    if expected is not None and current.version != expected:
                        self._conflict(key, expected, current.version)
                    version = current.version
                    if op == "update":
                        assert data is not None
                        transaction.set_data(path, record.encode(record.base_of(node[0]), data), node[1].version)
                    elif node[1].numChildren:  # keys live below: it stays, as an implicit parent
                        transaction.set_data(path, b"", node[1].version)
                    else:
                        transaction.delete(path, node[1].version)
                results = self._session.write(transaction.commit_async)
                failures = [result for result in results if isinstance(result, Exception)]
                if not failures:
                    written = results[1]
                    if isinstance(written, ZnodeStat):
                        return version, written.czxid
                    if node is not None:
                        return version, node[1].czxid
                    stat = self._session.call(client.exists_async, path)
                    return version, stat.czxid if stat is not None else 0
                key_failure = results[1] if len(results) > 1 else None
                if isinstance(key_failure, BadVersionError) and expected is not None:
                    self._conflict(key, expected, None)
                # The root's marks or the key changed between the reads and the transaction
                # (another writer): read both again and judge again.
            raise ConnectionLoss(f"fenced write of {key!r} kept racing with concurrent writes")

    def _conflict(self, key: str, expected: int, actual: int | None) -> None:
        self._record(Event.CONFLICT, key=key, version=expected)
        now = f"at version {actual}" if actual is not None else "changed concurrently"
        raise VersionConflictError(f"key {key!r} is {now}, not at version {expected}")

    def _prune(self, key: str) -> None:
        """Remove implicit parents left without children, deepest first; give way to any race."""
        client = self._session.client
        parent = validation.parent_of(key)
        with translating():
            while parent:
                path = key_path(self.path, parent)
                node = read_data(self._session, path)
                if node is None or record.is_key(node[0]) or node[1].numChildren:
                    return
                try:
                    self._session.call(client.delete_async, path, version=node[1].version)
                except (NotEmptyError, NoNodeError, BadVersionError):
                    return
                parent = validation.parent_of(parent)

    def _done(self, event: str, key: str, version: int, sent: float, key_czxid: int) -> int:
        # ``sent``: when this write began, so the log bounds it from both sides (a process
        # paused before stamping ts does not move the write later in the pipeline's eyes).
        incarnation = self._incarnation.of(key_czxid)
        self._record(event, key=key, version=version, sent=sent, store_incarnation=incarnation)
        return version


class ZooKeeperListenerRegistry(ZooKeeperHandle, RegistryHandle):
    """Value listeners watch a key's znode (its data); key-set listeners its children."""

    folder = "kv"

    def __init__(self, context: ZooKeeperContext, name: str) -> None:
        super().__init__(context, name)
        self._watches: dict[tuple[str, str], Watch[Any]] = {}

    def _value_listener_added(self, key: str, listeners: ListenerSet[str | None], first: bool) -> None:
        if not first:
            return
        path = key_path(self.path, key)

        def read(watch: WatchFn) -> str | None:
            return record.value_of(read_data(self._session, path, watch))

        self._start(("value", key), read, lambda value: self._dispatcher.notify(listeners, value))

    def _key_set_listener_added(self, namespace: str, listeners: ListenerSet[set[str]], first: bool) -> None:
        if not first:
            return
        path = key_path(self.path, namespace)

        def read(watch: WatchFn) -> frozenset[str]:
            return frozenset(decode_name(name) for name in read_children(self._session, path, watch))

        self._start(("key_set", namespace), read, lambda names: self._dispatcher.notify(listeners, set(names)))

    def _start(self, what: tuple[str, str], read: Callable[[WatchFn], Any], deliver: Callable[[Any], None]) -> None:
        watch: Watch[Any] = Watch(self._session, read, deliver)
        watch.start()
        with self._lock:
            self._watches[what] = watch

    def _value_listeners_gone(self, key: str) -> None:
        self._stop(("value", key))

    def _key_set_listeners_gone(self, namespace: str) -> None:
        self._stop(("key_set", namespace))

    def _stop(self, what: tuple[str, str]) -> None:
        with self._lock:
            watch = self._watches.pop(what, None)
        if watch is not None:
            watch.stop()

    def close(self) -> None:
        if self._closed:
            return
        self._clear_listeners()
        with self._lock:
            watches, self._watches = list(self._watches.values()), {}
        for watch in watches:
            watch.stop()
        super().close()
