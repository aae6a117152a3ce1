"""Which resources a watch event of a Lease or a store ConfigMap concerns.

controller-runtime maps an owned object's event to its owner (EnqueueRequestForOwner);
here each resource whose status is read from the shared caches names the objects it
reads (kubecoord.operator.mirror.Route: one object by name, or every object with a label
value), and this index answers, for one changed object, the resources that read it —
dict lookups, on the watch thread. Labels and names, not ownerReferences, because a
member Lease is read before the operator adopts it, and a same-named object the operator
does not own is still what the resource reports on (NotOwned).

A Lease change that only renews it (a new renewTime, nothing else of its spec, labels,
annotations or owners) changes no status and is dropped here: thousands of leaders and
members renew every few seconds. What a renewal postpones — a member's expiry — comes
back through the snapshot's ``recheck_in``, not through events.

Guarantee: ``lookup`` is safe against concurrent ``add``/``remove`` from the loop (each
route's keys are an immutable tuple, replaced whole).
"""

from __future__ import annotations

from typing import Any

from kubecoord.operator.mirror import Route
from kubecoord.wire import object_names

Key = tuple[str, str, str]
"""(plural, namespace, name) of a resource."""

_LABELS = (object_names.GROUP_LABEL, object_names.STORE_LABEL)
"""The label keys routes select on (member Leases by group, shards by store)."""
_LEASE_SPEC = ("holderIdentity", "leaseTransitions", "acquireTime", "leaseDurationSeconds")
"""What of a Lease's spec a status can show (everything but renewTime)."""


class RouteIndex:
    """(namespace, route) -> the resources reading it."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str, str, str], tuple[Key, ...]] = {}

    def add(self, key: Key, routes: list[Route]) -> None:
        for route in routes:
            entry = (key[1], *route)
            current = self._keys.get(entry, ())
            if key not in current:
                self._keys[entry] = (*current, key)

    def remove(self, key: Key, routes: list[Route]) -> None:
        for route in routes:
            entry = (key[1], *route)
            remaining = tuple(k for k in self._keys.get(entry, ()) if k != key)
            if remaining:
                self._keys[entry] = remaining
            else:
                self._keys.pop(entry, None)

    def lookup(self, namespace: str, plural: str, name: str, old: dict[str, Any] | None,
               new: dict[str, Any] | None) -> list[Key]:
        """The resources that read the object ``plural``/``name`` (before: ``old``, after:
        ``new``); none for a Lease change that only renews it."""
        if plural == "leases" and not lease_moved(old, new):
            return []
        keys = list(self._keys.get((namespace, plural, "", name), ()))
        for label in _LABELS:
            for obj in (old, new):
                value = _label(obj, label)
                if value is not None:
                    keys.extend(k for k in self._keys.get((namespace, plural, label, value), ()) if k not in keys)
        return keys

    def __len__(self) -> int:
        return len(self._keys)


def lease_moved(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Whether a Lease change is more than a renewal (created, deleted, a new holder, epoch,
    duration, data, labels or owners)."""
    if old is None or new is None:
        return True
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if any(old_spec.get(field) != new_spec.get(field) for field in _LEASE_SPEC):
        return True
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return any(old_meta.get(field) != new_meta.get(field) for field in ("labels", "annotations", "ownerReferences"))


def _label(obj: dict[str, Any] | None, key: str) -> str | None:
    if obj is None:
        return None
    labels = (obj.get("metadata") or {}).get("labels")
    value = labels.get(key) if isinstance(labels, dict) else None
    return value if isinstance(value, str) else None
