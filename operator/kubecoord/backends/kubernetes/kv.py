"""Storage and ListenerRegistry on one ConfigMap per store.

Object layout: ConfigMap ``kubecoord-kv.STORE`` (naming.py) labelled kubecoord.dev/store,
one data key per KV key (keys.py: reversible encoding), each entry the JSON of its key,
per-key version and value.

Writes: read the ConfigMap from the store's watch cache, apply the change to that one
entry, PUT the whole ConfigMap with the cached resourceVersion as precondition (POST when
it does not exist yet). A 409 means someone else wrote the ConfigMap meanwhile: re-read
and re-apply — a write to another key never surfaces to the caller; only a real change of
*this* key turns into KeyExistsError / KeyNotFoundError / VersionConflictError, and only
after a fresh read confirms it (a stale cache never fails a write).

Size: one store is one ConfigMap, and the API server refuses a ConfigMap whose data
exceeds 1 MiB. kubecoord does NOT shard: a write that would take the store's encoded data
over 1 MiB (MAX_STORE_BYTES) raises StoreFullError naming that limit, and nothing is
written. Sharding would turn single-key writes into multi-object writes (no atomicity
across ConfigMaps) and every key-set listing into a fan-out; a store that needs more
than 1 MiB should be split by the application into several stores, or use ZooKeeper.
Values are limited to ``max_value_bytes`` (default 256 KiB; at most 1 MiB minus room for
the entry's envelope).

Reads (fetch, fetch_versioned, children) are served from the store's watch cache once it
is warm — zero API requests — and see this handle's own writes at once (the write's
response is folded into the cache). Not guaranteed: that a read sees another process's
write that the watch has not delivered yet; use expected_version for read-modify-write.
"""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from kubecoord import validation
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.api import KeySetListener, ListenerRegistry, Storage, ValueListener, Versioned
from kubecoord.backends.kubernetes import naming
from kubecoord.backends.kubernetes.client import CONFIGMAPS, AlreadyExists, Conflict, NotFound
from kubecoord.backends.kubernetes.context import Context, WatchingHandle
from kubecoord.backends.kubernetes.keys import Entry, data_size, dump_entry, encode_key, load_entries
from kubecoord.backends.kubernetes.watch import Change, Observed
from kubecoord.errors import (
    BackendUnavailableError,
    KeyExistsError,
    KeyNotFoundError,
    StoreFullError,
    VersionConflictError,
)

T = TypeVar("T")

MAX_STORE_BYTES = 1024 * 1024
"""The API server's limit on a ConfigMap's data (keys plus values)."""
DEFAULT_MAX_VALUE_BYTES = 256 * 1024
MAX_ATTEMPTS = 100
_REFUSALS = (KeyExistsError, KeyNotFoundError, VersionConflictError, StoreFullError)


def entries_of(observed: Observed | None) -> dict[str, Entry]:
    return load_entries((observed.obj.get("data") or {}) if observed is not None else {})


def children_of(entries: dict[str, Entry], namespace: str) -> set[str]:
    names = (validation.child_name(namespace, key) for key in entries)
    return {name for name in names if name is not None}


def _done(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


class _StoreHandle(WatchingHandle):
    """A handle on the store's ConfigMap, fed by the store's shared informer."""

    _resource = CONFIGMAPS

    def __init__(self, context: Context, name: str) -> None:
        super().__init__(context)
        self.name = name
        self._configmap = naming.store_configmap_name(name)

    def _selector(self) -> dict[str, str]:
        return {"label_selector": naming.store_selector(self.name)}

    def close(self) -> None:
        self._closed = True
        self._stop_watching()

    def crash(self) -> None:
        self.close()


class KubeStorage(_StoreHandle, Storage):
    _kind = "Storage"

    def __init__(self, context: Context, name: str, *, size_limit: int | None = None) -> None:
        super().__init__(context, name)
        self.max_value_bytes = context.max_value_bytes
        self._size_limit = min(size_limit, MAX_STORE_BYTES) if size_limit else MAX_STORE_BYTES
        """Largest ConfigMap data size: 1 MiB, or the KVStore resource's sizeLimit (binding.py)."""

    # -- reads --------------------------------------------------------------------------
    def fetch(self, key: str) -> Future[str | None]:
        entry = self._read(key)
        return _done(entry.value if entry is not None else None)

    def fetch_versioned(self, key: str) -> Future[Versioned | None]:
        entry = self._read(key)
        return _done(entry.versioned if entry is not None else None)

    def _read(self, key: str) -> Entry | None:
        validation.check_key(key)
        self._check_open()
        return entries_of(self._watching().get(self._configmap)).get(key)

    def children(self, namespace: str = "") -> set[str]:
        validation.check_namespace(namespace)
        self._check_open()
        return children_of(entries_of(self._watching().get(self._configmap)), namespace)

    # -- writes -------------------------------------------------------------------------
    def put(self, key: str, data: str) -> int:
        validation.check_key(key)
        validation.check_value(data, max_bytes=self.max_value_bytes)

        def create(current: Entry | None) -> Entry:
            if current is not None:
                raise KeyExistsError(f"key {key!r} already exists (version {current.version})")
            return Entry(key, data, 1)

        return self._write(key, create, "put")

    def update(self, key: str, data: str, *, expected_version: int | None = None) -> int:
        validation.check_key(key)
        validation.check_value(data, max_bytes=self.max_value_bytes)
        validation.check_version(expected_version)

        def replace(current: Entry | None) -> Entry:
            current = self._expect(key, current, expected_version)
            return Entry(key, data, current.version + 1)

        return self._write(key, replace, "updated", expected_version)

    def delete(self, key: str, *, expected_version: int | None = None) -> None:
        validation.check_key(key)
        validation.check_version(expected_version)

        def remove(current: Entry | None) -> None:
            self._expect(key, current, expected_version)

        self._write(key, remove, "deleted", expected_version)

    def _expect(self, key: str, current: Entry | None, expected: int | None) -> Entry:
        if current is None:
            raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
        if expected is not None and current.version != expected:
            raise VersionConflictError(f"key {key!r} is at version {current.version}, not {expected}")
        return current

    def _write(
        self, key: str, change: Callable[[Entry | None], Entry | None], event: str, expected: int | None = None
    ) -> int:
        self._check_open()
        informer = self._watching()
        data_key = encode_key(key)
        fresh = False
        for attempt in range(MAX_ATTEMPTS):
            observed = informer.get(self._configmap)
            current = entries_of(observed).get(key)
            try:
                new = change(current)
                body = self._body(observed, data_key, new)
            except _REFUSALS as exc:
                if not fresh:  # judged on a cached copy: confirm against the server first
                    informer.refresh(self._configmap)
                    fresh = True
                    continue
                if isinstance(exc, VersionConflictError):
                    self._context.events.record(
                        primitive="kv", name=self.name, event="conflict", key=key, version=expected
                    )
                raise
            try:
                if observed is None:
                    written = self._context.client.create(CONFIGMAPS, body)
                else:
                    written = self._context.client.replace(CONFIGMAPS, self._configmap, body)
            except (AlreadyExists, Conflict, NotFound):
                # Someone else wrote the ConfigMap (maybe another key): re-read, re-apply.
                informer.refresh(self._configmap)
                fresh = True
                time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
                continue
            informer.offer(written)
            version = new.version if new is not None else (current.version if current is not None else 0)
            self._context.events.record(primitive="kv", name=self.name, event=event, key=key, version=version)
            return version
        raise BackendUnavailableError(
            f"store {self.name!r}: gave up after {MAX_ATTEMPTS} conflicting writes of ConfigMap {self._configmap!r}"
        )

    def _body(self, observed: Observed | None, data_key: str, new: Entry | None) -> dict[str, Any]:
        if observed is None:
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": self._configmap,
                    "namespace": self._context.namespace,
                    "labels": {naming.STORE_LABEL: self.name, naming.MANAGED_BY_LABEL: naming.MANAGED_BY},
                },
            }
            data: dict[str, str] = {}
        else:
            body = {k: v for k, v in observed.obj.items() if k != "data"}
            body["metadata"] = copy.deepcopy(observed.obj.get("metadata") or {})
            data = dict(observed.obj.get("data") or {})
        if new is None:
            data.pop(data_key, None)
        else:
            data[data_key] = dump_entry(new)
        size = data_size(data)
        if self._size_limit < MAX_STORE_BYTES and size > self._size_limit:
            raise StoreFullError(
                f"store {self.name!r} would hold {size} bytes, over the sizeLimit of its KVStore resource "
                f"({self._size_limit} bytes); delete keys or raise spec.sizeLimit"
            )
        if size > MAX_STORE_BYTES:
            raise StoreFullError(
                f"store {self.name!r} would hold {size} bytes, over the 1 MiB ({MAX_STORE_BYTES} bytes) that one "
                f"ConfigMap ({self._configmap!r}) can hold; delete keys or spread them over several stores"
            )
        body["data"] = data
        return body


class KubeListenerRegistry(_StoreHandle, ListenerRegistry):
    _kind = "ListenerRegistry"

    def __init__(self, context: Context, name: str) -> None:
        super().__init__(context, name)
        self._lock = threading.Lock()
        self._value_listeners: dict[str, ListenerSet[str | None]] = {}
        self._key_set_listeners: dict[str, ListenerSet[set[str]]] = {}

    def _on_changes(self, changes: list[Change]) -> None:
        for name, old, new in changes:
            if name != self._configmap:
                continue
            before, after = entries_of(old), entries_of(new)
            with self._lock:
                if self._closed:
                    return
                for key, listeners in self._value_listeners.items():
                    if before.get(key) != after.get(key):
                        entry = after.get(key)
                        self._context.dispatcher.notify(listeners, entry.value if entry is not None else None)
                for namespace, key_set_listeners in self._key_set_listeners.items():
                    children = children_of(after, namespace)
                    if children != children_of(before, namespace):
                        self._context.dispatcher.notify(key_set_listeners, children)

    def add_value_change_listener(self, key: str, listener: ValueListener) -> None:
        validation.check_key(key)
        self._check_open()
        with self._lock:
            self._value_listeners.setdefault(key, ListenerSet()).add(listener)
        self._watching()

    def remove_value_change_listener(self, key: str, listener: ValueListener) -> None:
        validation.check_key(key)
        with self._lock:
            if key in self._value_listeners:
                self._value_listeners[key].remove(listener)

    def add_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        validation.check_namespace(namespace)
        self._check_open()
        with self._lock:
            self._key_set_listeners.setdefault(namespace, ListenerSet()).add(listener)
        self._watching()

    def remove_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        validation.check_namespace(namespace)
        with self._lock:
            if namespace in self._key_set_listeners:
                self._key_set_listeners[namespace].remove(listener)
