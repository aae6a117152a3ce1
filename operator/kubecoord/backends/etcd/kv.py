"""Storage and ListenerRegistry on etcd: one etcd key per kubecoord key.

Layout: the store ``NAME`` keeps key ``K`` at ``PREFIX/_kubecoord/kv/NAME/K`` (the value
as UTF-8); its fencing marks (kubecoord.wire.fences, format 1) are the value of the store
key ``PREFIX/_kubecoord/kv/NAME`` itself. Versions are etcd's own per-key ``version``
(1 at create, +1 per put, gone with a delete), so compare-and-set is one transaction
comparing it. A fenced write's transaction also compares the marks key's mod revision
and writes the raised mark, so the check and the write are one step.

Guarantees: a write reports not applied only when it was not; a lost answer is resolved
by its marker (outcomes.py), else OutcomeUnknownError. Listeners follow a watch of the
store's prefix (watches.py), resumed at the last revision seen, level-triggered. Not
guaranteed: that marks outlive a deletion of the store's keys behind its clients' backs.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

from kubecoord._core.handles import ReadingRegistryHandle, StorageHandle
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.api import Fence, Versioned
from kubecoord.backends.etcd import txn
from kubecoord.backends.etcd.context import EtcdContext
from kubecoord.backends.etcd.errors import translating
from kubecoord.backends.etcd.outcomes import WriteMarkers
from kubecoord.backends.etcd.transport import OUT_OF_RANGE, GatewayError, Unanswered, b64, prefix_end
from kubecoord.backends.etcd.watches import Entry, PrefixView, read_prefix
from kubecoord.errors import (
    CoordinationError,
    KeyExistsError,
    KeyNotFoundError,
    OutcomeUnknownError,
    VersionConflictError,
)
from kubecoord.wire import fences
from kubecoord.wire.events import Event

_FENCE_ROUNDS = 50
"""Writes retried after the marks changed under them (definitely not applied)."""
_EXISTS = "exists"


def store_root(context: EtcdContext, name: str) -> str:
    return context.internal("kv", name)


def _exists(key: str) -> dict[str, Any]:
    return {"key": b64(key), "result": "GREATER", "target": "CREATE", "create_revision": "0"}


class EtcdStorage(StorageHandle):
    def __init__(self, context: EtcdContext, name: str, markers: WriteMarkers) -> None:
        super().__init__(context, name, context.events)
        self.name = name
        self.max_value_bytes = context.options.max_value_bytes
        self._context = context
        self._markers = markers
        self._root = store_root(context, name)

    def _key(self, key: str) -> str:
        return f"{self._root}/{key}"

    def _fetch_versioned(self, key: str) -> Future[Versioned | None]:
        future: Future[Versioned | None] = Future()
        try:
            with translating():
                entry = txn.read(self._context.transport, self._key(key))
            future.set_result(Versioned(entry.value.decode(), entry.version) if entry is not None else None)
        except CoordinationError as exc:
            future.set_exception(exc)
        return future

    def _put(self, key: str, data: str, fence: Fence | None) -> int:
        sent = time.time()
        version, incarnation = self._write(
            key, txn.put(self._key(key), data), [txn.created(self._key(key), 0)], fence, "put"
        )
        self._record(Event.PUT, key=key, version=version, sent=sent, store_incarnation=incarnation)
        return version

    def _update(self, key: str, data: str, expected_version: int | None, fence: Fence | None) -> int:
        path = self._key(key)
        compare = [txn.versioned(path, expected_version) if expected_version is not None else _exists(path)]
        sent = time.time()
        version, incarnation = self._write(
            key, txn.put(path, data), compare, fence, "update", expected=expected_version
        )
        self._record(Event.UPDATED, key=key, version=version, sent=sent, store_incarnation=incarnation)
        return version

    def _delete(self, key: str, expected_version: int | None, fence: Fence | None) -> None:
        path = self._key(key)
        compare = [txn.versioned(path, expected_version) if expected_version is not None else _exists(path)]
        sent = time.time()
        version, incarnation = self._write(
            key, txn.delete(path), compare, fence, "delete", expected=expected_version
        )
        self._record(Event.DELETED, key=key, version=version, sent=sent, store_incarnation=incarnation)

    def _write(
        self, key: str, operation: dict[str, Any], compare: list[dict[str, Any]], fence: Fence | None, what: str,
        *, expected: int | None = None,
    ) -> tuple[int, str]:
        """One write transaction; the key's version after it (before it, for a delete) and the
        store's incarnation (the create revision of its root key, which every write creates
        if absent: a store deleted behind its clients' backs comes back as a new one)."""
        path = self._key(key)
        where = f"etcd store {self.name!r}"
        with translating():
            for _ in range(_FENCE_ROUNDS):
                guard: list[dict[str, Any]] = []
                raise_mark: list[dict[str, Any]] = []
                marks_revision = 0
                if fence is not None:
                    marks_entry = txn.read(self._context.transport, self._root)
                    marks_revision = marks_entry.mod_revision if marks_entry is not None else 0
                    marks = fences.decode(marks_entry.value if marks_entry is not None else None, where=where)
                    raised = fences.admit(marks, fence.name, fence.token, where=where)
                    guard = [txn.modified(self._root, marks_revision)]
                    if raised is not None:
                        raise_mark = [txn.put(self._root, fences.encode(raised))]
                marker = self._markers.new()
                before = [txn.get(path)] if what == "delete" else []
                after = [] if what == "delete" else [txn.get(path)]
                # etcd refuses two puts of one key in a transaction: the raised mark creates the root too.
                root = raise_mark or [_create_if_absent(self._root)]
                success = [*before, operation, *after, *root, txn.get(self._root), *self._markers.operations(marker)]
                try:
                    answer = txn.run(
                        self._context.transport, [*compare, *guard, txn.created(marker.key, 0)], success,
                        [txn.get(path), txn.get(self._root)], idempotent=False,
                    )
                except Unanswered:
                    described = f"{what} {key!r} in store {self.name!r}"
                    revision = self._markers.resolve(marker, described)
                    return self._applied_at(path, revision, what, expected, described)
                if answer.succeeded:
                    self._markers.answered(marker)
                    entry, root_entry = answer.read(0 if what == "delete" else 1), answer.read(3)
                    return (entry.version if entry is not None else 0), _incarnation(root_entry)
                current, marks_now = answer.read(0), answer.read(1)
                if fence is not None and (marks_now.mod_revision if marks_now is not None else 0) != marks_revision:
                    continue  # the marks moved under us: nothing was written; check them again
                self._refuse(key, what, current, expected)
        raise CoordinationError(f"{where}: the fencing marks kept changing; {what} {key!r} not applied")

    def _applied_at(self, path: str, revision: int, what: str, expected: int | None, described: str) -> tuple[int, str]:
        """The version and the store's incarnation of a write whose lost answer was resolved
        as applied at ``revision``: read at that revision, or, when etcd compacted it away,
        what the write itself fixes (a create makes version 1, a compare-and-set expected+1)
        and the store key read now if it was created by then. OutcomeUnknownError when they
        cannot be read (the write was applied: never reported otherwise)."""
        try:
            try:
                entry = txn.read(self._context.transport, path, revision=revision - 1 if what == "delete" else revision)
                return (entry.version if entry is not None else 0), self._incarnation_at(revision)
            except GatewayError as exc:
                if exc.code != OUT_OF_RANGE:
                    raise
            root = txn.read(self._context.transport, self._root)
        except (GatewayError, CoordinationError) as exc:
            raise OutcomeUnknownError(f"etcd: {described}: applied at revision {revision}; its version "
                                      f"could not be read ({exc})") from None
        if what == "put":
            version: int | None = 1
        elif expected is not None:
            version = expected if what == "delete" else expected + 1
        else:
            version = None
        if version is None or root is None or root.create_revision > revision:
            raise OutcomeUnknownError(f"etcd: {described}: applied at revision {revision}, which etcd compacted "
                                      "before its version could be read")
        return version, _incarnation(root)

    def _incarnation_at(self, revision: int) -> str:
        return _incarnation(txn.read(self._context.transport, self._root, revision=revision))

    def _refuse(self, key: str, what: str, current: Entry | None, expected: int | None) -> None:
        if what == "put":
            raise KeyExistsError(f"key {key!r} already exists in store {self.name!r}")
        if current is None:
            raise KeyNotFoundError(f"key {key!r} not found in store {self.name!r}")
        self._record(Event.CONFLICT, key=key, version=expected)
        raise VersionConflictError(
            f"key {key!r} in store {self.name!r} is at version {current.version}, not {expected}"
        )

    def _children(self, namespace: str) -> set[str]:
        base = f"{self._root}/{namespace}/" if namespace else f"{self._root}/"
        with translating():
            answer = self._context.transport.call(
                "kv/range", {"key": b64(base), "range_end": prefix_end(base), "keys_only": True}, idempotent=True
            )
        return {Entry.of(kv).key[len(base):].split("/", 1)[0] for kv in answer.get("kvs", [])}


def _create_if_absent(key: str) -> dict[str, Any]:
    """A nested transaction: put ``key`` (empty: no fencing marks) unless it exists."""
    return {"request_txn": {"compare": [txn.created(key, 0)], "success": [txn.put(key, "")], "failure": []}}


def _incarnation(root: Entry | None) -> str:
    return str(root.create_revision) if root is not None else ""


def children_of(entries: dict[str, Entry], base: str) -> set[str]:
    return {key[len(base):].split("/", 1)[0] for key in entries if key.startswith(base)}


class EtcdListenerRegistry(ReadingRegistryHandle):
    """What a key's listeners heard is its mod revision (0: absent)."""

    def __init__(self, context: EtcdContext, name: str) -> None:
        super().__init__(context, name, context.events)
        self.name = name
        self._context = context
        self._base = store_root(context, name) + "/"
        self._lock = threading.Lock()
        self._view: PrefixView | None = None

    def _ensure_view(self) -> PrefixView:
        with self._lock:
            if self._view is None:
                self._view = self._context.watch_prefix(self._base, self._changed, f"kv-{self.name}")
            view = self._view
        with translating():
            if not view.wait_for(1, self._context.options.request_timeout):
                read_prefix(self._context.transport, self._base)  # raises why the view could not read
        return view

    def _value_listener_added(self, key: str, listeners: ListenerSet[str | None], first: bool) -> None:
        view = self._ensure_view()
        if first:
            entry = view.entries().get(self._base + key)
            self._hear_value(key, entry.mod_revision if entry is not None else 0)

    def _key_set_listener_added(self, namespace: str, listeners: ListenerSet[set[str]], first: bool) -> None:
        view = self._ensure_view()
        if first:
            self._hear_key_set(namespace, children_of(view.entries(), self._namespace_base(namespace)))

    def _namespace_base(self, namespace: str) -> str:
        return self._base + namespace + "/" if namespace else self._base

    def _changed(self, view: PrefixView) -> None:
        if self._closed:
            return
        entries = view.entries()
        keys, namespaces = self._heard()
        values: dict[str, tuple[object, str | None]] = {}
        for key in keys:
            entry = entries.get(self._base + key)
            values[key] = (entry.mod_revision, entry.value.decode()) if entry is not None else (0, None)
        key_sets = {namespace: children_of(entries, self._namespace_base(namespace)) for namespace in namespaces}
        for listeners, heard in self._changes(values, key_sets):
            self._context.dispatcher.notify(listeners, heard)

    def close(self) -> None:
        self._closed = True
        self._clear_listeners()
        self._stop()

    def crash(self) -> None:
        self._closed = True
        self._stop()

    def _stop(self) -> None:
        with self._lock:
            view, self._view = self._view, None
        if view is not None:
            view.stop()
