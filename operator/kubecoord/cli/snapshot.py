"""One-shot reads of the kubernetes backend's objects, for the state commands.

What ``kubecoord leader``, ``members`` and ``kv get|ls`` show on kubernetes:// comes from
a few GETs (kubeapi.py) read through the same wire contracts the backend writes and reads
with — object names (wire.object_names), the Lease converters and the member rule
(wire.lease), the one expiry rule (wire.leader_record.expires_at), the shard layout
(wire.kv_shards) and the entry encoding (wire.kv_entries) — so each mechanism stays
written once and the two paths agree (tests/cli/test_read_path.py runs both on the same
objects, on the emulator and the real API server).

The snapshots answer as a freshly connected handle does: an observation is as old as
this process's read of it, so a held Lease counts as held (no process can judge another
machine's renewTime against its own clock; wire/leader_record.py).

Requests: leader 1 (the Lease), members 1 (a label-selected list of Leases), kv get 1-2
(shard 0, and the key's shard when it is another), kv ls one per shard — besides the
declared-name checks (resources.py).
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any, Generic, NamedTuple, TypeVar

from kubecoord import validation
from kubecoord.cli.kubeapi import KubeApi
from kubecoord.wire import object_names
from kubecoord.wire.kv_entries import Entry, load_entries
from kubecoord.wire.kv_shards import recorded_shards, shard_of
from kubecoord.wire.leader_record import Observation, expires_at
from kubecoord.wire.lease import member_of_lease, record_from_lease

T = TypeVar("T")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
CONFIGMAPS = "/api/v1/namespaces/{namespace}/configmaps"


# NamedTuples rather than dataclasses: ``dataclasses`` imports ``inspect``, about 10 ms of
# the command's start-up.


class Ready(NamedTuple, Generic[T]):
    """An answer already read: what views.keys() waits on (a Future on the full path)."""

    value: T

    def result(self, timeout: float | None = None) -> T:
        return self.value


class Holder(NamedTuple):
    """The leader as kubecoord.api.Leader has it: id, data, epoch."""

    id: str
    data: str
    epoch: int


def _observed(lease: dict[str, Any]) -> Observation:
    version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
    return Observation(record_from_lease(lease), version, time.monotonic())


class ElectionSnapshot(NamedTuple):
    service: str
    lease: dict[str, Any] | None

    def get_leader(self) -> Holder | None:
        """As a fresh handle's get_leader(): the holder of a held Lease, while it has not
        expired in this process's observation (the one rule: expires_at)."""
        if self.lease is None:
            return None
        seen = _observed(self.lease)
        if not seen.record.holder or time.monotonic() >= expires_at(seen):
            return None
        return Holder(seen.record.holder, seen.record.data, seen.record.transitions)


class GroupSnapshot(NamedTuple):
    group: str
    leases: list[dict[str, Any]]

    def membership(self) -> dict[str, str]:
        """member id -> data of the group's member Leases alive in this observation."""
        live: dict[str, str] = {}
        for lease in self.leases:
            member = member_of_lease(lease, self.group)
            if member is not None and time.monotonic() < expires_at(_observed(lease)):
                live[member[0]] = member[1]
        return live


class StoreSnapshot(NamedTuple):
    name: str
    shards: int
    read: dict[int, dict[str, Entry]]
    """shard index -> its entries, for the shards read (a shard that does not exist: {})."""

    def fetch_versioned(self, key: str) -> Ready[Entry | None]:
        """From the shard the key's hash picks, as the backend reads it (an entry written
        into another shard by hand is listed by children() but not read)."""
        return Ready(self.read.get(shard_of(key, self.shards), {}).get(key))

    def children(self, namespace: str = "") -> set[str]:
        names = (validation.child_name(namespace, key) for entries in self.read.values() for key in entries)
        return {name for name in names if name is not None}


def _path(template: str, namespace: str, name: str = "") -> str:
    base = template.format(namespace=urllib.parse.quote(namespace, safe=""))
    return f"{base}/{urllib.parse.quote(name, safe='')}" if name else base


def lease_path(namespace: str, name: str) -> str:
    return _path(LEASES, namespace, name)


def election(api: KubeApi, service: str) -> ElectionSnapshot:
    name = object_names.election_lease_name(service)
    return ElectionSnapshot(service, api.get(lease_path(api.namespace, name), verb="get", plural="leases", name=name))


def group(api: KubeApi, group_name: str) -> GroupSnapshot:
    selector = urllib.parse.quote(object_names.group_selector(group_name), safe="")
    listing = api.get(f"{_path(LEASES, api.namespace)}?labelSelector={selector}", verb="list", plural="leases")
    return GroupSnapshot(group_name, list((listing or {}).get("items") or []))


def _shard(api: KubeApi, store: str, index: int) -> dict[str, Any] | None:
    name = object_names.store_shard_name(store, index)
    return api.get(_path(CONFIGMAPS, api.namespace, name), verb="get", plural="configmaps", name=name)


def store(api: KubeApi, store_name: str, *, key: str | None = None) -> StoreSnapshot:
    """The store's entries: every shard, or with ``key`` only the shard that holds it
    (shard 0 first, which records the layout)."""
    zero = _shard(api, store_name, 0)
    if zero is None:
        return StoreSnapshot(store_name, 1, {})
    shards = recorded_shards(zero)
    indexes = [shard_of(key, shards)] if key is not None else list(range(shards))
    read: dict[int, dict[str, Entry]] = {}
    for index in indexes:
        shard = zero if index == 0 else _shard(api, store_name, index)
        read[index] = load_entries((shard or {}).get("data") or {})
    return StoreSnapshot(store_name, shards, read)
