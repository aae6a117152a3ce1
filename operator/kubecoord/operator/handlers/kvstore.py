"""KVStore: the ConfigMap (kubernetes) or znodes (zookeeper) of one key-value store.

Status: keys, bytes, size, sizeLimitBytes. Ready turns False (reason SizeLimitExceeded)
and a Warning Event is posted while the store holds more than spec.sizeLimit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.operator import metrics
from kubecoord.operator.cached import CachedStoreMirror, caches
from kubecoord.operator.handlers._resource import LiveResource, register
from kubecoord.operator.mirror import Mirror, Snapshot, StoreMirror
from kubecoord.operator.model import size_limit_bytes


def _mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    limit = size_limit_bytes(dict(body.get("spec") or {}))
    cache = caches(coordinator)
    if cache is not None:  # the namespace's ConfigMap cache, no handle (kubecoord.operator.cached)
        return CachedStoreMirror(cache, body["metadata"]["name"], limit, dict(body.get("status") or {}))
    return StoreMirror(coordinator, body["metadata"]["name"], limit, dict(body.get("status") or {}), wake)


async def _after(resource: LiveResource, snapshot: Snapshot) -> None:
    metrics.KV_KEYS.labels(resource.namespace, resource.name).set(snapshot.status["keys"])


register("kvstores", _mirror, _after)
