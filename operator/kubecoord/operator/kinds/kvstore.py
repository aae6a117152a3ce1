"""KVStore: the ConfigMap (kubernetes) or znodes (zookeeper) of one key-value store.

Status: keys, bytes, size, sizeLimitBytes. Ready turns False (reason SizeLimitExceeded)
and a Warning Event is posted while the store holds more than spec.sizeLimit.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

from kubecoord.api import Coordinator
from kubecoord.capabilities import StateCache
from kubecoord.operator import metrics
from kubecoord.operator.controller.reconciler import LiveResource
from kubecoord.operator.mirror import Mirror, Notice, Route, Snapshot, caches
from kubecoord.operator.model import human_bytes, size_limit_bytes
from kubecoord.wire import object_names


class StoreStatus(Mirror):
    """status.keys, bytes and size of one store, from ``_read_values`` (key -> value of
    every key). Size counts keys and values in UTF-8 bytes."""

    def __init__(self, limit: int, previous: dict[str, Any], wake: Callable[[], None] | None) -> None:
        super().__init__(wake)
        self._limit = limit
        self._over_limit = int(previous.get("bytes") or 0) > limit

    @abc.abstractmethod
    def _read_values(self) -> dict[str, str]: ...

    def _snapshot(self) -> Snapshot:
        values = self._read_values()
        size = sum(len(key.encode()) + len(value.encode()) for key, value in values.items())
        notices: list[Notice] = []
        over = size > self._limit
        if over and not self._over_limit:
            notices.append(
                Notice("Warning", "SizeLimitExceeded", f"{size} bytes stored, spec.sizeLimit is {self._limit}")
            )
        self._over_limit = over
        status = {"keys": len(values), "bytes": size, "size": human_bytes(size), "sizeLimitBytes": self._limit}
        if over:
            message = f"{size} bytes stored, more than spec.sizeLimit ({self._limit})"
            return Snapshot(status, notices, ready=(False, "SizeLimitExceeded", message))
        return Snapshot(status, notices)


class StoreMirror(StoreStatus):
    """The store status through a storage handle and a listener registry.

    Watches every namespace's key set and every key's value, re-subscribing as the tree
    changes, so that writes anywhere in the store wake the mirror.
    """

    def __init__(
        self, coord: Coordinator, name: str, limit: int, previous: dict[str, Any], wake: Callable[[], None]
    ) -> None:
        super().__init__(limit, previous, wake)
        self._storage = coord.storage(name)
        self._registry = coord.listener_registry(name)
        self._namespaces: set[str] = set()
        self._keys: set[str] = set()
        self._subscribe(namespaces={""}, keys=set())

    def _subscribe(self, *, namespaces: set[str], keys: set[str]) -> None:
        for namespace in namespaces - self._namespaces:
            self._registry.add_key_set_change_listener(namespace, self._on_change)
        for namespace in self._namespaces - namespaces:
            self._registry.remove_key_set_change_listener(namespace, self._on_change)
        for key in keys - self._keys:
            self._registry.add_value_change_listener(key, self._on_change)
        for key in self._keys - keys:
            self._registry.remove_value_change_listener(key, self._on_change)
        self._namespaces, self._keys = namespaces, keys

    def _walk(self) -> tuple[set[str], dict[str, str]]:
        namespaces: set[str] = set()
        values: dict[str, str] = {}
        pending = [""]
        while pending:
            namespace = pending.pop()
            namespaces.add(namespace)
            for child in self._storage.children(namespace):
                path = f"{namespace}/{child}" if namespace else child
                pending.append(path)
                value = self._storage.fetch(path).result()
                if value is not None:
                    values[path] = value
        return namespaces, values

    def _read_values(self) -> dict[str, str]:
        namespaces, values = self._walk()
        self._subscribe(namespaces=namespaces, keys=set(values))
        return values

    def close(self) -> None:
        self._subscribe(namespaces=set(), keys=set())
        self._registry.close()
        self._storage.close()


class CachedStoreMirror(StoreStatus):
    """The store status from its shards' ConfigMaps in the namespace cache."""

    blocking: ClassVar[bool] = False

    def __init__(self, cache: StateCache, name: str, limit: int, previous: dict[str, Any]) -> None:
        super().__init__(limit, previous, None)
        self._cache = cache
        self._name = name

    def routes(self) -> list[Route]:
        return [("configmaps", object_names.STORE_LABEL, self._name)]

    def _read_values(self) -> dict[str, str]:
        return self._cache.cached_entries(self._name)

    def close(self) -> None:
        """Nothing to release: the mirror holds no handle."""


def mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    limit = size_limit_bytes(dict(body.get("spec") or {}))
    cache = caches(coordinator)
    if cache is not None:  # the namespace's ConfigMap cache, no handle
        return CachedStoreMirror(cache, body["metadata"]["name"], limit, dict(body.get("status") or {}))
    return StoreMirror(coordinator, body["metadata"]["name"], limit, dict(body.get("status") or {}), wake)


async def after_snapshot(resource: LiveResource, snapshot: Snapshot) -> None:
    metrics.KV_KEYS.labels(resource.namespace, resource.name).set(snapshot.status["keys"])

