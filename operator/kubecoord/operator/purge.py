"""What a deleted resource leaves on a backend that Kubernetes cannot clean up (ZooKeeper,
Cassandra, etcd): the finalizer's work (the status controller runs it, then removes the
finalizer; kubecoord.operator.controller.spec).

A Purgeable backend (kubecoord.capabilities) deletes the resource's objects, and for a
Group its group coordinator's record and election too; on another backend a KVStore's
keys are deleted one by one; anything else is logged and left. Not guaranteed: that
ephemeral objects of live sessions go before their sessions do.
"""

from __future__ import annotations

import asyncio
import logging

from kubecoord.api import Coordinator
from kubecoord.capabilities import Purgeable
from kubecoord.errors import CoordinationError
from kubecoord.operator.connections import connections
from kubecoord.operator.model import BackendSpec
from kubecoord.wire.events import Primitive
from kubecoord.wire.group_record import derived_name

log = logging.getLogger("kubecoord.operator")

PRIMITIVES = {"LeaderElection": Primitive.LEADER_ELECTION, "Group": Primitive.GROUP, "KVStore": Primitive.KV}
"""kind -> the primitive its backing objects are (what the backend's purge takes)."""


async def purge(backend: BackendSpec, kind: str, name: str) -> int:
    """Remove a resource's znodes through the backend (ephemeral ones go with their sessions)."""
    coordinator = await connections.acquire(backend)
    try:
        if isinstance(coordinator, Purgeable):
            purge = coordinator.purge
            deleted = int(await asyncio.to_thread(purge, PRIMITIVES[kind], name) or 0)
            if kind == "Group":  # the group coordinator's record and election (kubecoord.group_coordinator)
                for derived in (Primitive.KV, Primitive.LEADER_ELECTION):
                    deleted += int(await asyncio.to_thread(purge, derived, derived_name(name)) or 0)
            return deleted
        if kind == "KVStore":
            return await asyncio.to_thread(delete_every_key, coordinator, name)
        log.warning("backend cannot purge", extra={"backend": backend.backend, "kind": kind, "resource": name})
        return 0
    finally:
        await connections.release(backend)


def delete_every_key(coordinator: Coordinator, name: str) -> int:
    """Delete every key of the store ``name``, deepest first; returns how many went."""
    deleted = 0
    with coordinator.storage(name) as storage:
        pending = [""]
        keys: list[str] = []
        while pending:
            namespace = pending.pop()
            for child in storage.children(namespace):
                path = f"{namespace}/{child}" if namespace else child
                pending.append(path)
                keys.append(path)
        for key in sorted(keys, key=len, reverse=True):
            try:
                storage.delete(key)
                deleted += 1
            except CoordinationError:
                pass  # a pure namespace (no value of its own) or deleted meanwhile
    return deleted
