"""Names, labels and annotations of the Kubernetes objects kubecoord uses — in one place.

The operator imports this module to find (and clean up, and report on) the objects the
clients create, so every name the backend derives is derived here and nowhere else.

Layout in a namespace:

==========================  =====================================  =========================
primitive                   object                                 name
==========================  =====================================  =========================
leader election SERVICE     coordination.k8s.io/v1 Lease           ``SERVICE`` (the same name
                                                                   a client-go LeaseLock uses)
epochs issued on SERVICE    Lease, only spec.leaseTransitions      ``SERVICE.epoch``
(the high-water mark)
member ID of group GROUP    Lease, label kubecoord.dev/group=GROUP ``GROUP.m.SLUG-HASH``
KV store STORE, shard 0     ConfigMap, label kubecoord.dev/store,  ``kubecoord-kv.STORE``
                            annotation kubecoord.dev/kv-shards
KV store STORE, shard I>0   ConfigMap, label kubecoord.dev/store   ``kubecoord-kv.STORE.I``
==========================  =====================================  =========================

Guarantees: every derived name is a valid DNS-1123 subdomain of at most 253 characters;
member Lease names are injective in (group, member id) — ids are case-sensitive and may
hold any character, so the name carries a hash of the exact id and the id itself is kept
in an annotation. Election Leases are named by the service (a DNS-1123 label, no dots),
member Leases always contain a dot, so the two never collide; a high-water mark's name
ends in ``.epoch`` and a member Lease's never does (its last part ends in a hash after a
dash), so no mark collides with either.
A member Lease counts for its group only when its name is the one derived from its group
and member id (member_id_of): labels and annotations alone prove nothing.
Not guaranteed: that nothing else in the namespace uses these names.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

GROUP_LABEL = "kubecoord.dev/group"
"""On every member Lease: the group it belongs to (list/watch selector)."""
STORE_LABEL = "kubecoord.dev/store"
"""On every KV ConfigMap: the store it belongs to (list/watch selector)."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubecoord"

MEMBER_ID_ANNOTATION = "kubecoord.dev/member-id"
"""On a member Lease: the exact member id (the name only carries a slug and a hash)."""
MEMBER_DATA_ANNOTATION = "kubecoord.dev/member-data"
"""On a member Lease: the member's data."""
KV_SHARDS_ANNOTATION = "kubecoord.dev/kv-shards"
"""On shard 0 of a KV store: how many ConfigMaps the store's keys are spread over.

Written once, when shard 0 is created, and never changed: a key's shard is a hash of the
key modulo this count, so changing it would move keys (kv.py). Absent: 1 (stores written
before sharding)."""
KV_FENCES_ANNOTATION = "kubecoord.dev/kv-fences"
"""On a KV ConfigMap that took a fenced write: the highest token accepted per fencing
domain, in the stored form of kubecoord.wire.fences (format 1)."""
KV_WRITE_ANNOTATION = "kubecoord.dev/kv-write"
"""On every KV ConfigMap: a random marker, new on each write of the shard by kubecoord.

Only the write that carried a marker can have put it there, so a writer whose answer was
lost reads the shard back: its own marker means its write was applied (kv.py)."""
FINAL_STATE_UNKNOWN_ANNOTATION = "kubecoord.dev/final-state-unknown"
"""Never written to the API: on an object an informer's ``last_state`` returns for a
deletion it noticed by a re-list (after a broken watch) rather than by a DELETED event —
the cached version, which newer ones may have followed before the deletion (client-go's
DeletedFinalStateUnknown). An owner re-creating it must not trust it to be the last."""
HOLDER_DATA_ANNOTATION = "kubecoord.dev/holder-data"
"""On an election Lease: JSON {"holder": id, "data": data} of the holder that wrote it.

Keyed to the holder because a client-go elector taking over rewrites only the spec and
keeps our annotations: data whose holder differs from spec.holderIdentity is stale."""

MAX_OBJECT_NAME = 253
_SLUG_CHARS = 40
_HASH_CHARS = 16


def election_lease_name(service: str) -> str:
    """The Lease of the election ``service``: the service name itself (client-go compatible)."""
    return service


def epoch_lease_name(record: str) -> str:
    """The Lease holding the high-water mark of the epochs issued on the election Lease
    ``record`` (kubecoord._core.lease.elector): ``RECORD.epoch``."""
    return f"{record}.epoch"


def member_lease_name(group: str, member_id: str) -> str:
    """The Lease of ``member_id`` in ``group``: ``GROUP.m.SLUG-HASH``.

    SLUG is a lowercase, readable rendering of the id (for kubectl), HASH the first 16 hex
    digits of the SHA-256 of the exact id (for uniqueness).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", member_id.lower()).strip("-")[:_SLUG_CHARS].strip("-") or "id"
    digest = hashlib.sha256(member_id.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    return f"{member_lease_prefix(group)}{slug}-{digest}"


def member_id_of(lease: dict[str, Any], group: str) -> str | None:
    """The member id a Lease carries, if it is ``group``'s member Lease of that id: labelled
    for ``group`` and named exactly ``member_lease_name(group, id)``; else None.

    The name is the proof: a Lease labelled for another group, or named for another id (a
    client of group ``alpha`` writing ``alpha.m.x`` labelled ``beta``, or claiming one of
    beta's ids), is nobody's member — the admission policy confines a Group's clients by
    name, never by label or annotation."""
    metadata = lease.get("metadata") or {}
    if (metadata.get("labels") or {}).get(GROUP_LABEL) != group:
        return None
    member_id = (metadata.get("annotations") or {}).get(MEMBER_ID_ANNOTATION)
    if not isinstance(member_id, str) or not member_id:
        return None
    return member_id if metadata.get("name") == member_lease_name(group, member_id) else None


def member_lease_prefix(group: str) -> str:
    """What every member Lease of ``group`` starts with, and no other kubecoord Lease: a group
    name is a DNS-1123 label (no dot), so ``GROUP.m.`` cannot start another group's names."""
    return f"{group}.m."


def store_configmap_name(store: str) -> str:
    """The first ConfigMap (shard 0) of the KV store ``store``: it records the shard count."""
    return f"kubecoord-kv.{store}"


def store_shard_name(store: str, index: int) -> str:
    """The ConfigMap of shard ``index`` of ``store``: shard 0 is ``kubecoord-kv.STORE``, then
    ``kubecoord-kv.STORE.1`` and on (a store name has no dot, so two stores never collide)."""
    base = store_configmap_name(store)
    return base if index == 0 else f"{base}.{index}"


def store_shard_names(store: str, shards: int) -> list[str]:
    """Every ConfigMap of a store of ``shards`` shards (what RBAC grants by name)."""
    return [store_shard_name(store, index) for index in range(shards)]


def group_selector(group: str) -> str:
    """Label selector of the member Leases of ``group``."""
    return f"{GROUP_LABEL}={group}"


def store_selector(store: str) -> str:
    """Label selector of the ConfigMap(s) of ``store``."""
    return f"{STORE_LABEL}={store}"
