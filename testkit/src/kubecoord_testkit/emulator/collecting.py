"""Background garbage collection and the controllers that finish deletions.

One pass (run shortly after any delete, any write of an object with ownerReferences or
a deletionTimestamp, and every ``interval`` seconds) does what these do in a cluster:

- the garbage collector: an object whose ownerReferences all name objects (by uid) that
  no longer exist is deleted (background propagation); a dependent of an owner being
  deleted in the foreground is deleted; an owner's ``orphan`` finalizer strips its uid
  from its dependents and is then removed, its ``foregroundDeletion`` finalizer is
  removed once no dependent is left;
- the namespace controller: a Terminating namespace has its contents deleted and is
  removed once it is empty;
- the apiextensions finalizer: a deleted CRD has its custom resources deleted and is
  removed once none is left (then its endpoints disappear from discovery).

Not emulated: blockOwnerDeletion (dependents never block their owner's deletion beyond
foregroundDeletion waiting for them to be gone) and ownerReference kind/apiVersion checks
(owners are matched by uid only).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from kubecoord_testkit.emulator import status
from kubecoord_testkit.emulator.registry import Registry
from kubecoord_testkit.emulator.resources import CRD_KEY, NAMESPACE_KEY, ResourceType
from kubecoord_testkit.emulator.strategies import CRD_FINALIZER, NAMESPACE_FINALIZER

JSON = dict[str, Any]
_log = logging.getLogger(__name__)


def _type_for(registry: Registry, key: tuple[str, str]) -> ResourceType | None:
    return _types_by_key(registry).get(key)


def _types_by_key(registry: Registry) -> dict[tuple[str, str], ResourceType]:
    by_key: dict[tuple[str, str], ResourceType] = {}
    for rtype in registry.types():
        by_key.setdefault(rtype.key, rtype)
    return by_key


def _delete(registry: Registry, rtype: ResourceType, obj: JSON, policy: str = "Background") -> None:
    meta = obj["metadata"]
    try:
        registry.delete(rtype, meta.get("namespace"), meta["name"], {"propagationPolicy": policy})
    except status.StatusError as error:
        if error.code != 404:
            _log.warning("garbage collection could not delete an object", extra={"status": error.body})


def _remove_finalizer(
    registry: Registry, rtype: ResourceType, obj: JSON, finalizer: str, *, spec: bool = False
) -> None:
    new = copy.deepcopy(obj)
    holder = new.setdefault("spec", {}) if spec else new["metadata"]
    holder["finalizers"] = [f for f in holder.get("finalizers") or [] if f != finalizer]
    meta = obj["metadata"]
    registry.replace(rtype, meta.get("namespace"), meta["name"], new, None)


def collect(registry: Registry) -> int:
    """One garbage-collection pass; returns how many changes it made."""
    store = registry.store
    changes = 0
    # Only objects with owners or being deleted matter: the pass stays cheap on a big store.
    objects = [
        (key, obj)
        for key, obj in store.all_objects()
        if obj["metadata"].get("ownerReferences") or obj["metadata"].get("deletionTimestamp")
    ]
    types = _types_by_key(registry)
    dependents: dict[str, list[tuple[ResourceType, JSON]]] = {}
    for key, obj in objects:
        rtype = types.get(key)
        if rtype is None:
            continue
        owners = obj["metadata"].get("ownerReferences") or []
        for ref in owners:
            dependents.setdefault(ref.get("uid", ""), []).append((rtype, obj))
        dangling = owners and all(store.by_uid(ref.get("uid", "")) is None for ref in owners)
        if dangling and not obj["metadata"].get("deletionTimestamp"):
            _delete(registry, rtype, obj)
            changes += 1
    for key, obj in objects:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp"):
            continue
        rtype = types.get(key)
        if rtype is None or store.get(key, meta.get("namespace", ""), meta["name"]) is not obj:
            continue  # changed since the snapshot: the next pass looks again
        finalizers = meta.get("finalizers") or []
        children = dependents.get(meta["uid"], [])
        if "orphan" in finalizers:
            for child_type, child in children:
                stripped = copy.deepcopy(child)
                stripped["metadata"]["ownerReferences"] = [
                    ref for ref in child["metadata"]["ownerReferences"] if ref.get("uid") != meta["uid"]
                ]
                cmeta = child["metadata"]
                registry.replace(child_type, cmeta.get("namespace"), cmeta["name"], stripped, None)
            _remove_finalizer(registry, rtype, obj, "orphan")
            changes += 1
        elif "foregroundDeletion" in finalizers:
            live = [
                (t, c)
                for t, c in children
                if store.get(t.key, c["metadata"].get("namespace", ""), c["metadata"]["name"])
            ]
            for child_type, child in live:
                if not child["metadata"].get("deletionTimestamp"):
                    _delete(registry, child_type, child, "Foreground")
                    changes += 1
            if not live:
                _remove_finalizer(registry, rtype, obj, "foregroundDeletion")
                changes += 1
        elif key == NAMESPACE_KEY:
            changes += _finish_namespace(registry, rtype, obj)
        elif key == CRD_KEY and CRD_FINALIZER in finalizers:
            changes += _finish_crd(registry, rtype, obj)
    return changes


def _finish_namespace(registry: Registry, rtype: ResourceType, namespace: JSON) -> int:
    name = namespace["metadata"]["name"]
    remaining = deleted = 0
    for key in registry.store.resource_keys():
        content_type = _type_for(registry, key)
        if content_type is None or not content_type.namespaced:
            continue
        for obj in registry.store.select(key, name)[0]:
            remaining += 1
            if not obj["metadata"].get("deletionTimestamp"):
                _delete(registry, content_type, obj)
                deleted += 1
    if remaining == 0 and NAMESPACE_FINALIZER in ((namespace.get("spec") or {}).get("finalizers") or []):
        _remove_finalizer(registry, rtype, namespace, NAMESPACE_FINALIZER, spec=True)
        return 1
    return deleted


def _finish_crd(registry: Registry, rtype: ResourceType, crd: JSON) -> int:
    custom = [t for t in registry.types() if t.custom and t.crd_name == crd["metadata"]["name"]]
    remaining = deleted = 0
    if custom:
        for obj in registry.store.select(custom[0].key)[0]:
            remaining += 1
            if not obj["metadata"].get("deletionTimestamp"):
                _delete(registry, custom[0], obj)
                deleted += 1
    if remaining == 0:
        _remove_finalizer(registry, rtype, crd, CRD_FINALIZER)
        return 1
    return deleted
