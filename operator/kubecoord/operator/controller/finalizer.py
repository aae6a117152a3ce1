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
from kubecoord.wire.crd import GROUP, PLURALS, VERSION

log = logging.getLogger("kubecoord.operator")

CLEANUP_SECONDS = 10.0
"""How long the finalizer's work waits for a try at purging a deleted resource's objects
off Kubernetes (ZooKeeper znodes, Cassandra rows, etcd keys) before it is requeued; the
try itself goes on until it ends."""
CLEANUP_RETRIES = 3
"""Purge tries that ended in a failure before the finalizer is removed anyway."""


class Finalizer:
    """Cleans up after deleted resources; keeps each one's failed purge tries."""

    def __init__(self) -> None:
        self._purges: dict[Key, int] = {}
        """Failed purges of a deleted resource's backend objects (its finalizer's tries)."""
        self._purging: dict[Key, asyncio.Task[int]] = {}
        """A purge try that has not ended: its thread cannot be stopped, so it is waited for
        again, never run twice at once and never left behind by a released finalizer."""

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
        """Purge a deleted resource's backend objects, bounded (CLEANUP_RETRIES tries that
        ended in a failure: then the failure is logged and the finalizer removed anyway, so a
        dead ensemble never blocks a deletion forever), then remove the finalizer. The way
        out of a finalizer that must not wait:
        ``kubectl patch KIND NAME --type=merge -p '{"metadata":{"finalizers":null}}'``.

        A try that has not ended after CLEANUP_SECONDS is not abandoned: its thread may be
        waiting on a stalled connection and would go on deleting once it heals, emptying
        the objects of a resource re-created under the same name. The finalizer stays
        until that try ends (the backend client's own timeouts end it), and a retry waits
        for it rather than starting a second one. A try starts only while the resource (its
        uid) still holds the finalizer."""
        metadata = final["metadata"]
        key = (PLURALS[final["kind"]], metadata["namespace"], metadata["name"])
        backend = BackendSpec.from_spec(dict(final.get("spec") or {}), namespace=metadata["namespace"])
        kind, resource = final["kind"], f"{metadata['namespace']}/{metadata['name']}"
        running = self._purging.get(key)
        if running is None:
            # A retry queued before the finalizer went (or a second deletion event) must not
            # purge what a resource re-created under this name has written since.
            if not await _held_by_finalizer(key, metadata.get("uid")):
                self._purges.pop(key, None)
                log.info("not purging: the resource's finalizer is gone", extra={"kind": kind, "resource": resource})
                return
            running = self._purging[key] = asyncio.ensure_future(purge(backend, kind, metadata["name"]))
        await asyncio.wait({running}, timeout=CLEANUP_SECONDS)
        if not running.done():
            metrics.ERRORS.labels(kind, "delete").inc()
            log.info("cleanup still running; the finalizer stays until it ends",
                     extra={"kind": kind, "resource": resource, "seconds": CLEANUP_SECONDS})
            raise kubeapi.ApiException(status=0, reason="purge still running")
        del self._purging[key]
        try:
            deleted = running.result()
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


async def live_metadata(key: Key) -> dict[str, Any] | None:
    """The API's metadata of the resource ``key`` now (one GET; None: there is none)."""
    plural, namespace, name = key
    path = f"{kubeapi.collection_path(f'{GROUP}/{VERSION}', plural, namespace)}/{name}"
    try:
        current = await kubeapi.acall("GET", path)
    except kubeapi.ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict((current or {}).get("metadata") or {})


async def _held_by_finalizer(key: Key, uid: str | None) -> bool:
    """Whether the resource ``key`` with ``uid`` still waits for the operator's finalizer:
    only then may its backend objects be purged. While it waits, no resource of the same
    name can be created; once the finalizer is gone, the name's objects may be a new
    resource's."""
    metadata = await live_metadata(key) or {}
    return metadata.get("uid") == uid and spec_writer.FINALIZER in (metadata.get("finalizers") or [])
