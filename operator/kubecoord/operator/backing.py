"""The Kubernetes objects behind a resource on the kubernetes backend, named exactly as
the backend names them (kubecoord.backends.kubernetes.naming).

- LeaderElection NAME: the Lease NAME, created up front with an ownerReference to the
  resource, so Kubernetes' garbage collector deletes it with the resource.
- Group NAME: one Lease per member, created by the members themselves; the operator
  adopts each (adds the ownerReference). Expired members' Leases are reaped by the
  backend's observers, the operator's own membership handle among them.
- KVStore NAME: its ConfigMaps (shards) kubecoord-kv.NAME, kubecoord-kv.NAME.1, ..., all
  created up front with an ownerReference, so that clients granted them by name never need
  ``create``. The shard count comes from spec.sizeLimit when shard 0 is first created and is
  recorded on it (backends/kubernetes/sharding.py); later sizeLimit changes never change it.

Guarantee: after a resource is deleted, its finalizer removes every object of it that
carries no ownerReference yet (a member that joined after the last adoption), so a
deleted resource leaves nothing behind.
"""

from __future__ import annotations

from typing import Any

from kubecoord.backends.kubernetes import naming
from kubecoord.backends.kubernetes.sharding import recorded_shards, shard_count_for
from kubecoord.operator import kubeapi
from kubecoord.operator.model import owner_reference, size_limit_bytes

LEASES = ("coordination.k8s.io/v1", "leases")
CONFIGMAPS = ("v1", "configmaps")


def _metadata(body: dict[str, Any], name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": body["metadata"]["namespace"],
        "labels": {naming.MANAGED_BY_LABEL: naming.MANAGED_BY, **labels},
        "ownerReferences": [owner_reference(body)],
    }


def election_lease(body: dict[str, Any]) -> dict[str, Any]:
    name = naming.election_lease_name(body["metadata"]["name"])
    return {"apiVersion": LEASES[0], "kind": "Lease", "metadata": _metadata(body, name, {})}


def store_configmap(body: dict[str, Any], index: int = 0) -> dict[str, Any]:
    store = body["metadata"]["name"]
    name = naming.store_shard_name(store, index)
    labels = {naming.STORE_LABEL: store}
    return {"apiVersion": CONFIGMAPS[0], "kind": "ConfigMap", "metadata": _metadata(body, name, labels)}


async def ensure(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Create (or adopt) the objects a resource needs up front; returns them."""
    kind = body["kind"]
    if kind == "KVStore":
        objects = await _ensure_store(body)
    else:
        objects = [election_lease(body)] if kind == "LeaderElection" else []
        for obj in objects:
            await kubeapi.apply(obj)
    return objects


async def _ensure_store(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Shard 0 first (recording the shard count only if it creates it), then the others."""
    zero = store_configmap(body, 0)
    planned = shard_count_for(size_limit_bytes(dict(body.get("spec") or {})))
    created = {**zero, "metadata": {**zero["metadata"], "annotations": {naming.KV_SHARDS_ANNOTATION: str(planned)}}}
    path = kubeapi.object_path(zero)
    try:
        await kubeapi.acall("POST", path.collection, created)
        shards = planned
    except kubeapi.ApiException as error:
        if error.status != 409:
            raise
        existing = await kubeapi.acall("GET", path.item)
        shards = recorded_shards(existing or {})  # never changed once recorded (keys would move)
        await kubeapi.acall("PATCH", path.item, {"metadata": zero["metadata"]}, content_type=kubeapi.MERGE_PATCH)
    objects = [zero]
    for index in range(1, shards):
        shard = store_configmap(body, index)
        await kubeapi.apply(shard)
        objects.append(shard)
    return objects


async def member_leases(body: dict[str, Any]) -> list[dict[str, Any]]:
    group = body["metadata"]["name"]
    return await kubeapi.list_objects(*LEASES, body["metadata"]["namespace"], naming.group_selector(group))


def member_id(lease: dict[str, Any]) -> str | None:
    return (lease["metadata"].get("annotations") or {}).get(naming.MEMBER_ID_ANNOTATION)


async def adopt_members(body: dict[str, Any], leases: list[dict[str, Any]]) -> None:
    """Give member Leases an ownerReference to their Group (Kubernetes' GC then owns them)."""
    uid = body["metadata"]["uid"]
    for lease in leases:
        owners = lease["metadata"].get("ownerReferences") or []
        if any(owner.get("uid") == uid for owner in owners):
            continue
        patch = {"metadata": {"ownerReferences": [*owners, owner_reference(body)]}}
        path = kubeapi.object_path({"apiVersion": LEASES[0], "kind": "Lease", "metadata": lease["metadata"]})
        try:
            await kubeapi.acall("PATCH", path.item, patch, content_type=kubeapi.MERGE_PATCH)
        except kubeapi.ApiException as error:
            if error.status != 404:  # the member left meanwhile
                raise


async def delete_all(body: dict[str, Any]) -> int:
    """Delete every backing object of a resource (finalizer); returns how many were deleted."""
    deleted = 0
    kind, name = body["kind"], body["metadata"]["name"]
    if kind == "LeaderElection":
        deleted += await kubeapi.delete(election_lease(body))
    elif kind == "Group":
        for lease in await member_leases(body):
            obj = {
                "apiVersion": LEASES[0],
                "kind": "Lease",
                "metadata": {"name": lease["metadata"]["name"], **_ns(body)},
            }
            deleted += await kubeapi.delete(obj)
    elif kind == "KVStore":
        selector = naming.store_selector(name)
        for configmap in await kubeapi.list_objects(*CONFIGMAPS, body["metadata"]["namespace"], selector):
            obj = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": configmap["metadata"]["name"], **_ns(body)},
            }
            deleted += await kubeapi.delete(obj)
    return deleted


def _ns(body: dict[str, Any]) -> dict[str, str]:
    return {"namespace": body["metadata"]["namespace"]}
