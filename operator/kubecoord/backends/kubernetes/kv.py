"""Storage and ListenerRegistry on a few ConfigMaps per store (shards, wire/kv_shards.py).

Object layout: ConfigMaps ``kubecoord-kv.STORE`` (shard 0, which records the shard count)
and ``kubecoord-kv.STORE.I`` (wire/object_names.py), labelled kubecoord.dev/store; a key lives in the
shard its hash picks, as one data key (wire/kv_entries.py: reversible encoding) holding the JSON of
its key, per-key version and value.

Writes: read the key's shard from the watch cache, apply the change to that one entry,
PUT the whole shard with the cached resourceVersion as precondition (POST when it does
not exist yet). A 409 means someone else wrote the shard meanwhile: re-read and re-apply
— a write to another key never surfaces to the caller; only a real change of *this* key
turns into KeyExistsError / KeyNotFoundError / VersionConflictError, and only after a
fresh read confirms it, judged on that read's answer (a stale cache never fails a write,
even one whose watch moved past the shard without showing it).

Outcomes: a write is sent once per attempt. When its answer is lost (the connection reset
after sending, a read timeout, a server error; client.py raises OutcomeUnknownError) it is
never simply sent again — a repeat of a PUT that was applied answers 409, which would turn
the caller's applied put into KeyExistsError, an applied conditional update into
VersionConflictError, an applied delete into KeyNotFoundError, and re-apply a blind update.
Each shard write carries a fresh marker (annotation ``kubecoord.dev/kv-write``); the writer
reads the shard back: its marker there means the write was applied (the caller gets its
success); the shard still at the resourceVersion the write was conditioned on means it was
not, and cannot be anymore once the shard moves, so the same body is sent again (at most
one of the two can apply); the shard changed by another write meanwhile means it cannot be
told, and the caller gets OutcomeUnknownError, as when the read-back fails too.
KeyExistsError, KeyNotFoundError, VersionConflictError, StoreFullError and a plain
BackendUnavailableError always mean nothing was written.

Atomicity: a write of one key is atomic (one ConfigMap, one compare-and-set) and moves
one shard over the network, never the whole store. Nothing spans keys: two keys may sit
in different ConfigMaps, so there is no multi-key transaction, and a reader may see a
write to key A and not yet an earlier write to key B of another shard.

Fenced writes (``fence=Fence(name, token)``, kubecoord.api.Storage): the shard's annotation
``kubecoord.dev/kv-fences`` holds the highest token accepted per domain (wire/fences.py,
format 1). The mark is judged on the cached shard (a refusal only after a fresh read, as
above) and written in the same PUT as the entry, so the shard's resourceVersion makes the
check and the write one compare-and-set; the marks' scope is the key's shard.

Size: each shard holds at most 1 MiB (the API server's limit); the store as a whole at
most its KVStore's ``spec.sizeLimit`` (or shards x 1 MiB without a resource). A write that
would grow the store beyond either raises StoreFullError and writes nothing; deletes and
updates that do not grow the store always go through, so a store that is over its limit
(the limit was lowered) can be brought back under it. A value is judged by its size as
stored, not only its UTF-8 size (JSON escapes a control character in six bytes): an entry
no ConfigMap could hold raises ValueTooLargeError before any request. The whole-store limit is checked
against this process's view of the other shards: concurrent writers to different shards
can overshoot it by their writes in flight (the operator then reports SizeLimitExceeded).

Reads (fetch, fetch_versioned, children) are served from the shards' watch caches once
warm — zero API requests — and see this handle's own writes at once (the write's
response is folded into the cache). Each shard is listed and watched by name (field
selector ``metadata.name=NAME``), which is what RBAC granted by resourceNames allows.
Not guaranteed: that a read sees another process's write that the watch has not
delivered yet; use expected_version for read-modify-write.
"""

from __future__ import annotations

import copy
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from kubecoord import validation
from kubecoord._core.handles import RegistryHandle, StorageHandle
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.api import Fence, Versioned
from kubecoord.backends.kubernetes.cache import Change, Observed
from kubecoord.backends.kubernetes.client import CONFIGMAPS, AlreadyExists, Conflict, NotFound
from kubecoord.backends.kubernetes.context import HandleBase, KubernetesContext
from kubecoord.backends.kubernetes.shared_informer import Informer
from kubecoord.errors import (
    BackendUnavailableError,
    CoordinationError,
    FencedError,
    KeyExistsError,
    KeyNotFoundError,
    OutcomeUnknownError,
    StoreFullError,
    ValueTooLargeError,
    VersionConflictError,
)
from kubecoord.wire import fences, object_names
from kubecoord.wire.events import Event
from kubecoord.wire.kv_entries import Entry, data_size, dump_entry, encode_key, load_entries, stored_size
from kubecoord.wire.kv_shards import SHARD_BYTES, recorded_shards, shard_count_for, shard_of

T = TypeVar("T")
log = logging.getLogger("kubecoord.kubernetes.kv")

MAX_STORE_BYTES = SHARD_BYTES
"""The API server's limit on one ConfigMap's data (keys plus values): one shard."""
DEFAULT_MAX_VALUE_BYTES = 256 * 1024
MAX_ATTEMPTS = 100
RESOLVE_ATTEMPTS = 3
"""Read-backs (and sends again of an unchanged shard) before a lost answer is reported unknown."""
_REFUSALS = (KeyExistsError, KeyNotFoundError, VersionConflictError, StoreFullError, FencedError)


def entries_of(observed: Observed | None) -> dict[str, Entry]:
    return load_entries((observed.obj.get("data") or {}) if observed is not None else {})


def children_of(entries: dict[str, Entry], namespace: str) -> set[str]:
    names = (validation.child_name(namespace, key) for key in entries)
    return {name for name in names if name is not None}


def _versioned(entry: Entry | None) -> Versioned | None:
    return Versioned(entry.value, entry.version) if entry is not None else None


def _done(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


class _StoreHandle(HandleBase):
    """A handle on the store's shards, each fed by a shared informer on that ConfigMap."""

    name: str  # set by the core's Handle (Storage.name, ListenerRegistry.name)

    def __init__(self, context: KubernetesContext, name: str, *, shards: int | None = None) -> None:
        super().__init__(context, name)
        self._create_shards = shards or context.kv_shards
        """Shard count written if this handle creates the store (a recorded count wins)."""
        self._shard_lock = threading.RLock()
        self._informers: dict[int, Informer] = {}
        self._shards: int | None = None
        self._layout_uid: str | None = None
        """The uid of the shard 0 that ``_shards`` was read from: a store deleted and re-created
        (by hand, or by a KVStore with another sizeLimit) is a new incarnation whose shard count
        may differ, and keys written by the old count would land in the wrong ConfigMap."""
        self._names = {object_names.store_shard_name(name, 0): 0}

    # -- the shards' informers ----------------------------------------------------------
    def _informer(self, index: int) -> Informer:
        """The started informer of shard ``index`` (listing synchronously on first use)."""
        with self._shard_lock:
            informer = self._informers.get(index)
            if informer is not None:
                return informer
            pool = self._context.informers
            informer = pool.acquire(CONFIGMAPS, name=object_names.store_shard_name(self.name, index))
            informer.subscribe(self._on_changes)
            try:
                informer.start()
            except BaseException:
                informer.unsubscribe(self._on_changes)
                pool.release(informer)
                raise
            self._informers[index] = informer
            return informer

    def _layout(self) -> int | None:
        """The store's recorded shard count, every shard watched; None while it does not exist.
        Read again whenever shard 0 is another incarnation (uid) than the one last read."""
        shard_zero = self._informer(0).get(object_names.store_shard_name(self.name, 0))
        with self._shard_lock:
            if shard_zero is None:
                self._shards = self._layout_uid = None
                return None
            uid = str((shard_zero.obj.get("metadata") or {}).get("uid") or "")
            if self._shards is None or uid != self._layout_uid:
                self._shards, self._layout_uid = recorded_shards(shard_zero.obj), uid
                self._names = {object_names.store_shard_name(self.name, i): i for i in range(self._shards)}
            shards = self._shards
        for index in range(1, shards):
            self._informer(index)
        return shards

    def _observed(self) -> dict[int, Observed]:
        """The cached ConfigMap of every shard that exists."""
        shards = self._layout() or 1
        observed: dict[int, Observed] = {}
        for index in range(shards):
            current = self._informer(index).get(object_names.store_shard_name(self.name, index))
            if current is not None:
                observed[index] = current
        return observed

    def _entries(self) -> dict[str, Entry]:
        entries: dict[str, Entry] = {}
        for observed in self._observed().values():
            entries.update(entries_of(observed))
        return entries

    def _on_changes(self, changes: list[Change]) -> None:
        """Internal subscriber; shard 0 appearing with more shards starts watching them."""
        zero = object_names.store_shard_name(self.name, 0)
        for name, _, new in changes:
            appeared = name == zero and new is not None and self._shards is None and not self._closed
            if appeared and new is not None and recorded_shards(new.obj) > 1:
                # Not on this (the informer's) thread: starting an informer lists synchronously.
                threading.Thread(target=self._layout_quietly, name="kubecoord-kv-layout", daemon=True).start()

    def _layout_quietly(self) -> None:
        try:
            self._layout()
        except CoordinationError:  # the next read, write or listener call retries and raises
            log.info("watching a store's shards failed", extra={"store": self.name}, exc_info=True)

    def close(self) -> None:
        self._closed = True
        with self._shard_lock:
            informers, self._informers = list(self._informers.values()), {}
        for informer in informers:
            informer.unsubscribe(self._on_changes)
            self._context.informers.release(informer)

    def crash(self) -> None:
        self.close()


class KubeStorage(_StoreHandle, StorageHandle):

    def __init__(self, context: KubernetesContext, name: str, *, size_limit: int | None = None) -> None:
        super().__init__(context, name, shards=shard_count_for(size_limit) if size_limit else None)
        self.max_value_bytes = context.max_value_bytes
        self._size_limit = size_limit
        """The KVStore resource's sizeLimit for the whole store (binding.py), if bound."""

    # -- reads --------------------------------------------------------------------------
    def _fetch(self, key: str) -> Future[str | None]:
        entry = self._read(key)
        return _done(entry.value if entry is not None else None)

    def _fetch_versioned(self, key: str) -> Future[Versioned | None]:
        entry = self._read(key)
        return _done(_versioned(entry))

    def _read(self, key: str) -> Entry | None:
        shards = self._layout()
        if shards is None:
            return None
        index = shard_of(key, shards)
        return entries_of(self._informer(index).get(object_names.store_shard_name(self.name, index))).get(key)

    def _fetch_confirmed(self, key: str, max_age: float) -> tuple[Versioned | None, float]:
        """From the shard's watch cache while its watch heard from the server within
        ``max_age`` (an event or a bookmark), else from a GET of the shard (and of shard 0
        when the layout may have changed): a watch held open by a partition keeps the cache
        looking current forever and must never count as the server's word."""
        shards = self._layout()
        index = shard_of(key, shards) if shards is not None else 0
        informer = self._informer(index)
        if shards is not None and max_age > 0 and time.monotonic() - informer.confirmed_at <= max_age:
            evidence = informer.confirmed_at
            entry = self._read(key)
            return (_versioned(entry)), evidence
        sent = time.monotonic()
        # The server's answers, not the cache's view of them (Informer.refresh).
        shard = zero = self._informer(0).refresh(object_names.store_shard_name(self.name, 0))
        shards = self._layout() or (recorded_shards(zero.obj) if zero is not None else None)
        index = shard_of(key, shards) if shards is not None else 0
        if index != 0:
            shard = self._informer(index).refresh(object_names.store_shard_name(self.name, index))
        return _versioned(entries_of(shard).get(key)), sent

    def _children(self, namespace: str) -> set[str]:
        return children_of(self._entries(), namespace)

    # -- writes -------------------------------------------------------------------------
    def _check_stored_size(self, key: str, data: str) -> None:
        """ValueTooLargeError, before any request, for an entry that no shard could ever
        hold once stored (not StoreFullError: deleting keys would not make room for it)."""
        size = stored_size(key, data)
        if size > SHARD_BYTES:
            raise ValueTooLargeError(
                f"key {key!r}: its value is {len(data.encode('utf-8'))} bytes in UTF-8 but {size} bytes as stored "
                f"(JSON escapes control characters), over the {SHARD_BYTES} bytes one ConfigMap can hold"
            )

    def _put(self, key: str, data: str, fence: Fence | None) -> int:
        self._check_stored_size(key, data)

        def create(current: Entry | None) -> Entry:
            if current is not None:
                raise KeyExistsError(f"key {key!r} already exists (version {current.version})")
            return Entry(key, data, 1)

        return self._write(key, create, Event.PUT, fence=fence)

    def _update(self, key: str, data: str, expected_version: int | None, fence: Fence | None) -> int:
        self._check_stored_size(key, data)

        def replace(current: Entry | None) -> Entry:
            current = self._expect(key, current, expected_version)
            return Entry(key, data, current.version + 1)

        return self._write(key, replace, Event.UPDATED, expected_version, fence)

    def _delete(self, key: str, expected_version: int | None, fence: Fence | None) -> None:

        def remove(current: Entry | None) -> None:
            self._expect(key, current, expected_version)

        self._write(key, remove, Event.DELETED, expected_version, fence)

    def _expect(self, key: str, current: Entry | None, expected: int | None) -> Entry:
        if current is None:
            raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
        if expected is not None and current.version != expected:
            raise VersionConflictError(f"key {key!r} is at version {current.version}, not {expected}")
        return current

    def _write(
        self,
        key: str,
        change: Callable[[Entry | None], Entry | None],
        event: str,
        expected: int | None = None,
        fence: Fence | None = None,
    ) -> int:
        self._check_open()
        sent = time.time()  # logged as ``sent``: the write happened between it and the event's ts
        zero = object_names.store_shard_name(self.name, 0)
        data_key = encode_key(key)
        fresh = layout_confirmed = False
        read: tuple[str, Observed | None] | None = None
        """(ConfigMap, the server's answer) of the last fresh read: judged on, not the cache."""
        for attempt in range(MAX_ATTEMPTS):
            # The layout again on every attempt: a conflict may have shown a new incarnation.
            shards = self._layout()
            if shards is None:
                shards = self._create_shards
                if shard_of(key, shards) != 0:
                    self._create_shard_zero(shards)
                    shards = self._layout() or shards
            index = shard_of(key, shards)
            configmap = object_names.store_shard_name(self.name, index)
            informer = self._informer(index)
            observed = read[1] if read is not None and read[0] == configmap else informer.get(configmap)
            read = None
            if observed is None and index != 0 and not layout_confirmed:
                # Creating a shard other than 0: confirm the layout against the server first
                # (a cached shard 0 of a deleted incarnation would put the key out of place).
                self._informer(0).refresh(zero)
                layout_confirmed = True
                continue
            current = entries_of(observed).get(key)
            try:
                # The fence first (a stale holder learns nothing of the key); its mark is
                # written in the same PUT as the entry, under the shard's resourceVersion.
                marks = self._admit(observed, configmap, fence)
                new = change(current)
                body = self._body(observed, index, shards, data_key, new, marks, marker=uuid.uuid4().hex)
            except _REFUSALS as exc:
                if not fresh:  # judged on a cached copy: confirm against the server first
                    read = (configmap, informer.refresh(configmap))
                    fresh = True
                    continue
                if isinstance(exc, VersionConflictError):
                    self._record(Event.CONFLICT, key=key, version=expected)
                raise
            try:
                written = self._send(configmap, body)
            except OutcomeUnknownError as unknown:
                written = self._resolve(informer, configmap, body, unknown)
            except (AlreadyExists, Conflict, NotFound):
                # Someone else wrote the shard (maybe another key), or the store is another
                # incarnation now: re-read the shard and the layout, re-apply.
                read = (configmap, informer.refresh(configmap))
                if index != 0:
                    self._informer(0).refresh(zero)
                fresh = True
                time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
                continue
            informer.offer(written)
            version = new.version if new is not None else (current.version if current is not None else 0)
            # The ConfigMap's uid: a store deleted and re-created is a new incarnation whose
            # keys start again at version 1 (the pipeline judges versions per incarnation).
            uid = (written.get("metadata") or {}).get("uid")
            self._record(event, key=key, version=version, store_incarnation=uid, sent=sent)
            return version
        raise BackendUnavailableError(
            f"store {self.name!r}: gave up after {MAX_ATTEMPTS} conflicting writes of ConfigMap {configmap!r}"
        )

    def _send(self, configmap: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` when it has no resourceVersion (a new shard), else PUT it on that one."""
        if (body.get("metadata") or {}).get("resourceVersion"):
            return self._context.client.replace(CONFIGMAPS, configmap, body)
        return self._context.client.create(CONFIGMAPS, body)

    def _resolve(
        self, informer: Informer, configmap: str, body: dict[str, Any], unknown: OutcomeUnknownError
    ) -> dict[str, Any]:
        """The shard as read back after a write whose answer was lost, when the write was
        applied (sending it again while the shard has not moved); else OutcomeUnknownError."""
        marker = body["metadata"]["annotations"][object_names.KV_WRITE_ANNOTATION]
        base = body["metadata"].get("resourceVersion")  # None: the write created the shard
        for _ in range(RESOLVE_ATTEMPTS):
            try:
                shard = self._context.client.get(CONFIGMAPS, configmap)
            except CoordinationError as exc:
                raise OutcomeUnknownError(
                    f"store {self.name!r}: {unknown}; reading ConfigMap {configmap!r} back failed too: {exc}"
                ) from None
            if shard is not None:
                informer.offer(shard)
            metadata = (shard or {}).get("metadata") or {}
            written = (metadata.get("annotations") or {}).get(object_names.KV_WRITE_ANNOTATION)
            if shard is not None and written == marker:
                return shard  # applied (only this write carried the marker)
            unchanged = shard is None if base is None else metadata.get("resourceVersion") == base
            if not unchanged:  # another write came after: before it, ours may or may not have landed
                raise OutcomeUnknownError(
                    f"store {self.name!r}: {unknown}; ConfigMap {configmap!r} was written by someone else "
                    f"meanwhile, so whether this write was applied cannot be told"
                )
            # Not applied, and it can only ever apply on top of ``base``: send the same body
            # again; of the two, at most one can be applied.
            try:
                return self._send(configmap, body)
            except (AlreadyExists, Conflict, NotFound):
                continue  # the shard moved: our first send landed late, or someone else wrote
            except OutcomeUnknownError as again:
                unknown = again
        raise OutcomeUnknownError(f"store {self.name!r}: {unknown} (still unresolved after reading it back)")

    def _create_shard_zero(self, shards: int) -> None:
        """Create the store's empty shard 0 (recording ``shards``) unless someone did."""
        name = object_names.store_shard_name(self.name, 0)
        try:
            written = self._context.client.create(CONFIGMAPS, self._new_shard(0, shards))
        except (AlreadyExists, OutcomeUnknownError):  # created by someone (maybe by this answer-less create)
            self._informer(0).refresh(name)
            return
        self._informer(0).offer(written)

    def _new_shard(self, index: int, shards: int) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": object_names.store_shard_name(self.name, index),
            "namespace": self._context.namespace,
            "labels": {object_names.STORE_LABEL: self.name, object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY},
        }
        if index == 0:
            metadata["annotations"] = {object_names.KV_SHARDS_ANNOTATION: str(shards)}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {}}

    def _admit(self, observed: Observed | None, configmap: str, fence: Fence | None) -> fences.Marks | None:
        """The shard's fencing marks after admitting ``fence`` (None: unchanged); FencedError."""
        if fence is None:
            return None
        where = f"store {self.name!r} (ConfigMap {configmap!r})"
        annotations = ((observed.obj.get("metadata") or {}).get("annotations") or {}) if observed is not None else {}
        marks = fences.decode(annotations.get(fences.ANNOTATION), where=where)
        return fences.admit(marks, fence.name, fence.token, where=where)

    def _body(
        self,
        observed: Observed | None,
        index: int,
        shards: int,
        data_key: str,
        new: Entry | None,
        marks: fences.Marks | None = None,
        *,
        marker: str,
    ) -> dict[str, Any]:
        if observed is None:
            body = self._new_shard(index, shards)
            data: dict[str, str] = {}
        else:
            body = {k: v for k, v in observed.obj.items() if k != "data"}
            body["metadata"] = copy.deepcopy(observed.obj.get("metadata") or {})
            data = dict(observed.obj.get("data") or {})
        annotations = dict(body["metadata"].get("annotations") or {})
        if marks is not None:
            annotations[fences.ANNOTATION] = fences.encode(marks)
        annotations[object_names.KV_WRITE_ANNOTATION] = marker
        body["metadata"]["annotations"] = annotations
        before = data_size(data)
        if new is None:
            data.pop(data_key, None)
        else:
            data[data_key] = dump_entry(new)
        after = data_size(data)
        if after > before:  # only growth is refused: deletes and shrinking updates always go through
            self._check_room(index, shards, before, after)
        body["data"] = data
        return body

    def _check_room(self, index: int, shards: int, before: int, after: int) -> None:
        configmap = object_names.store_shard_name(self.name, index)
        if after > SHARD_BYTES:
            raise StoreFullError(
                f"store {self.name!r}: shard {configmap!r} would hold {after} bytes, over the 1 MiB "
                f"({SHARD_BYTES} bytes) one ConfigMap can hold; delete keys, or move the data to a store "
                f"created with a larger sizeLimit (more shards; this one has {shards})"
            )
        limit = min(self._size_limit or shards * SHARD_BYTES, shards * SHARD_BYTES)
        others = sum(
            data_size(dict(observed.obj.get("data") or {}))
            for other, observed in self._observed().items() if other != index
        )
        total = others + after
        if total > limit:
            what = "the sizeLimit of its KVStore resource" if self._size_limit else f"what its {shards} shard(s) hold"
            raise StoreFullError(
                f"store {self.name!r} would hold {total} bytes, over {what} ({limit} bytes); "
                f"delete keys or raise spec.sizeLimit"
            )


class KubeListenerRegistry(_StoreHandle, RegistryHandle):
    def __init__(self, context: KubernetesContext, name: str) -> None:
        super().__init__(context, name)
        self._lock = threading.Lock()

    def _on_changes(self, changes: list[Change]) -> None:
        super()._on_changes(changes)
        for name, old, new in changes:
            index = self._names.get(name)
            if index is None:
                continue
            with self._lock:
                if self._closed:
                    return
                before, after = entries_of(old), entries_of(new)
                with self._listeners_lock:
                    values, key_sets = list(self._values.items()), list(self._key_sets.items())
                for key, listeners in values:
                    if before.get(key) != after.get(key):
                        entry = after.get(key)
                        self._context.dispatcher.notify(listeners, entry.value if entry is not None else None)
                if not key_sets:
                    continue
                # A namespace's children span shards: the other shards as cached now, plus
                # this shard before and after the change.
                others: dict[str, Entry] = {}
                for other, informer in list(self._informers.items()):
                    if other != index:
                        others.update(entries_of(informer.get(object_names.store_shard_name(self.name, other))))
                for namespace, key_set_listeners in key_sets:
                    children = children_of({**others, **after}, namespace)
                    if children != children_of({**others, **before}, namespace):
                        self._context.dispatcher.notify(key_set_listeners, children)

    def _value_listener_added(self, key: str, listeners: ListenerSet[str | None], first: bool) -> None:
        self._layout()

    def _key_set_listener_added(self, namespace: str, listeners: ListenerSet[set[str]], first: bool) -> None:
        self._layout()
