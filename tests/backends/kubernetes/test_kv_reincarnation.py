"""A KV store deleted behind its clients' backs and re-created with another shard count (by
hand, or by a KVStore with a new sizeLimit), on the emulator and the real kube-apiserver: a
client that knew the old layout must not write keys where the new one does not look —
otherwise two clients create the same key at version 1 and read different values."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client as k8s

import kubecoord
from kubecoord import KeyExistsError
from kubecoord.wire import object_names
from kubecoord.wire.kv_shards import shard_of
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST


def _delete_store(cluster: Cluster, store: str) -> None:
    k8s.CoreV1Api(cluster.admin_api).delete_collection_namespaced_config_map(
        cluster.namespace, label_selector=f"{object_names.STORE_LABEL}={store}"
    )


def _key(shards: int, *, not_in: int = 0) -> str:
    return next(f"k{i}" for i in range(1000) if shard_of(f"k{i}", shards) != not_in)


@pytest.mark.parametrize(("before", "after"), [(1, 4), (4, 1)])
def test_a_store_recreated_with_another_shard_count_has_one_value_per_key(
    cluster: Cluster, before: int, after: int
) -> None:
    store = f"reinc-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"kubeconfig": str(cluster.admin_kubeconfig), **FAST}
    with kubecoord.connect(cluster.url, kv_shards=before, **options) as old_client, \
            kubecoord.connect(cluster.url, kv_shards=after, **options) as new_client:
        old = old_client.storage(store)
        for i in range(8):  # every shard of the old layout exists and is watched
            old.put(f"seed/{i}", "old")
        _delete_store(cluster, store)
        eventually(lambda: old.fetch("seed/0").result() is None, timeout=10)
        new = new_client.storage(store)
        new.put("marker", "new")  # re-creates the store with ``after`` shards
        key = _key(max(before, after))  # in a shard other than 0 of the larger layout
        outcomes = []
        for storage, value in ((old, "from-old"), (new, "from-new")):
            try:
                outcomes.append(storage.put(key, value))
            except KeyExistsError:
                outcomes.append(None)
        assert outcomes.count(1) == 1, outcomes  # exactly one create won
        winner = "from-old" if outcomes[0] == 1 else "from-new"
        eventually(lambda: old.fetch(key).result() == winner == new.fetch(key).result(), timeout=10)
        stored = [
            name for name, data in _store_data(cluster, store).items()
            if any(f'"k":"{key}"' in text for text in data.values())
        ]
        assert stored == [object_names.store_shard_name(store, shard_of(key, after))]


def _store_data(cluster: Cluster, store: str) -> dict[str, dict[str, str]]:
    items = k8s.CoreV1Api(cluster.admin_api).list_namespaced_config_map(
        cluster.namespace, label_selector=f"{object_names.STORE_LABEL}={store}"
    ).items
    return {item.metadata.name: dict(item.data or {}) for item in items}
