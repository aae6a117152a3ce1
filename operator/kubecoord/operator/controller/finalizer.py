"""The finalizer's job: what the controller does once a resource is deleted.

Off Kubernetes (ZooKeeper, Cassandra, etcd) the backend's objects cannot carry an
ownerReference, so a resource there carries the finalizer ``spec.FINALIZER`` (written with
its spec, kubecoord.operator.controller.spec): after the deletion its objects are purged
(kubecoord.operator.purge), bounded in time and tries, and then the finalizer removed. On
every backend, the clients' Role and RoleBinding are revoked before their Lease grants'
confinement is lifted (never a grant without its fence).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubecoord.operator import fencing, kubeapi, lease_grants, metrics, rbac
from kubecoord.operator.controller import spec as spec_writer
from kubecoord.operator.controller.owners import Key
from kubecoord.operator.model import BackendSpec
from kubecoord.operator.purge import purge
from kubecoord.wire.crd import PLURALS

log = logging.getLogger("kubecoord.operator")

CLEANUP_SECONDS = 10.0
"""One try at purging a deleted resource's objects off Kubernetes (ZooKeeper znodes)."""
CLEANUP_RETRIES = 3


class Finalizer:
    """Cleans up after deleted resources; keeps each one's failed purge tries."""

    def __init__(self) -> None:
        self._purges: dict[Key, int] = {}
        """Failed purges of a deleted resource's backend objects (its finalizer's tries)."""

    async def clean_up(self, final: dict[str, Any], *, running: bool) -> None:
        """After a deletion: revoke the clients' RBAC first, then lift their confinement;
        off Kubernetes, purge the backend's objects and release the finalizer.

        The garbage collector would delete the Role and RoleBinding too, but in no order
        relative to the Lease grants; revoking here first closes the window in which a
        former Group client holds the namespace-wide Lease grant without its fence."""
        spec = final.get("spec") or {}
        if not (running and fencing.allowed()):
            return
        if spec_writer.FINALIZER in ((final.get("metadata") or {}).get("finalizers") or []):
            await self._purge(final)
        if not spec.get("clients"):
            return
        # Every backend's: a RoleBinding left to the garbage collector would keep its
        # subjects confined (lease_grants counts a resource-less binding as kubernetes-backed).
        await rbac.revoke(final)
        if final.get("kind") in lease_grants.KINDS:
            await lease_grants.reconcile(final["metadata"]["namespace"])

    async def _purge(self, final: dict[str, Any]) -> None:
        """Purge a deleted resource's backend objects, bounded (CLEANUP_SECONDS a try,
        CLEANUP_RETRIES tries: then the failure is logged and the finalizer removed anyway,
        so a dead ensemble never blocks a deletion forever), then remove the finalizer. The
        way out of a finalizer that must not wait:
        ``kubectl patch KIND NAME --type=merge -p '{"metadata":{"finalizers":null}}'``."""
        metadata = final["metadata"]
        key = (PLURALS[final["kind"]], metadata["namespace"], metadata["name"])
        backend = BackendSpec.from_spec(dict(final.get("spec") or {}), namespace=metadata["namespace"])
        kind, resource = final["kind"], f"{metadata['namespace']}/{metadata['name']}"
        try:
            deleted = await asyncio.wait_for(purge(backend, kind, metadata["name"]), timeout=CLEANUP_SECONDS)
        except Exception as error:
            metrics.ERRORS.labels(kind, "delete").inc()
            tries = self._purges[key] = self._purges.get(key, 0) + 1
            last = tries >= CLEANUP_RETRIES
            log.log(logging.ERROR if last else logging.INFO,
                    "cleanup gave up: znodes may remain" if last else "cleanup failed; will retry",
                    extra={"kind": kind, "resource": resource, "try": tries,
                           "error": f"{type(error).__name__}: {error}"[:300]})
            if not last:
                raise kubeapi.ApiException(status=0, reason=f"purge failed: {error}") from error
            deleted = 0
        self._purges.pop(key, None)
        await spec_writer.remove_finalizer(final)
        metrics.forget(metadata["namespace"], metadata["name"])
        log.info("cleaned up", extra={"kind": kind, "resource": resource, "deleted": deleted})
