"""How a KV store's keys are spread over several ConfigMaps (shards).

The API server refuses a ConfigMap whose data exceeds 1 MiB, so a store is ``N``
ConfigMaps (object_names.store_shard_name) and a key lives in shard
``int(sha256(key)[:8]) mod N``. ``N`` is fixed for the life of the store: it is written
on shard 0 (annotation kubecoord.dev/kv-shards) by whoever creates shard 0 — the
operator from the KVStore's ``spec.sizeLimit`` (shard_count_for), or a client from its
``kv_shards`` option — and every client reads it from there. A store whose shard 0 has
no annotation has one shard (the layout before sharding), so old stores keep working.

Growing a store past ``N`` x 1 MiB is not done in place (it would move keys between
ConfigMaps, which no single write can do atomically): copy the keys into a new store
created with a larger sizeLimit, then point the application at it.

Guarantees: the shard of a key depends only on the key and ``N`` (SHA-256, the same on
every machine and Python version); a write of one key touches exactly one ConfigMap.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from kubecoord.errors import InvalidArgumentError
from kubecoord.wire import object_names

SHARD_BYTES = 1024 * 1024
"""The API server's limit on one ConfigMap's data (keys plus values)."""
SHARD_TARGET_BYTES = 512 * 1024
"""The share of a store's sizeLimit planned per shard: half of what one can hold, so that
an uneven spread of keys (a hash is not a perfect balance) still fits."""
MAX_SHARDS = 64


def shard_count_for(size_limit: int) -> int:
    """How many shards a store of ``size_limit`` bytes is created with (1 up to 512 KiB)."""
    return max(1, min(MAX_SHARDS, math.ceil(size_limit / SHARD_TARGET_BYTES)))


def shard_of(key: str, shards: int) -> int:
    """The shard index of ``key`` in a store of ``shards`` shards."""
    if shards <= 1:
        return 0
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards


def recorded_shards(shard_zero: dict[str, Any]) -> int:
    """The shard count written on a store's shard 0 (1 when absent or unreadable)."""
    annotations = (shard_zero.get("metadata") or {}).get("annotations") or {}
    raw = str(annotations.get(object_names.KV_SHARDS_ANNOTATION) or "1")
    return int(raw) if raw.isdigit() and 1 <= int(raw) <= MAX_SHARDS else 1


def check_shards(shards: object) -> int:
    """Validate a requested shard count (the ``kv_shards`` option)."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgumentError(f"kv_shards must be an int from 1 to {MAX_SHARDS}, got {shards!r}")
    return shards
