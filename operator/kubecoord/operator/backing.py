"""The Kubernetes objects behind a resource on the kubernetes backend, named exactly as
the backend names them (kubecoord.backends.kubernetes.naming).

- LeaderElection NAME: the Lease NAME, created up front with an ownerReference to the
  resource, so Kubernetes' garbage collector deletes it with the resource.
- Group NAME: one Lease per member, created by the members themselves; the operator
  adopts each (adds the ownerReference). Expired members' Leases are reaped by the
  backend's observers, the operator's own membership handle among them.
- KVStore NAME: the ConfigMap kubecoord-kv.NAME, created up front with an ownerReference.

Guarantee: after a resource is deleted, its finalizer removes every object of it that
carries no ownerReference yet (a member that joined after the last adoption), so a
deleted resource leaves nothing behind.
"""

from __future__ import annotations

from typing import Any

from kubecoord.backends.kubernetes import naming
from kubecoord.operator import kubeapi
from kubecoord.operator.model import owner_reference

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


def store_configmap(body: dict[str, Any]) -> dict[str, Any]:
    store = body["metadata"]["name"]
    name = naming.store_configmap_name(store)
    labels = {naming.STORE_LABEL: store}
    return {"apiVersion": CONFIGMAPS[0], "kind": "ConfigMap", "metadata": _metadata(body, name, labels)}


async def ensure(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Create (or adopt) the objects a resource needs up front; returns them."""
    kind = body["kind"]
    objects = {"LeaderElection": [election_lease(body)], "KVStore": [store_configmap(body)]}.get(kind, [])
    for obj in objects:
        await kubeapi.apply({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": obj["metadata"]})
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
