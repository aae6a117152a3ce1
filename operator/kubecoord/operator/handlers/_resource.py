"""The life cycle every kubecoord resource shares, registered once per kind.

- create / resume / spec change (kopf handlers): create the backing objects (kubernetes
  backend: Lease or ConfigMap with an ownerReference), reconcile the Role and RoleBinding
  of spec.clients and the namespace's Lease grants, then tell the status controller.
- status: no task per resource. kopf's watch of each kind feeds the status controller
  (kubecoord.operator.controller.status) through an event handler; its workers mirror the
  live state into status, repair drift from the informer cache and post Events.
- delete: on the zookeeper backend a finalizer purges the znodes, bounded (CLEANUP_SECONDS
  per try, CLEANUP_RETRIES tries, then kopf removes the finalizer and logs the failure);
  the way out of a finalizer that must not wait is
  ``kubectl patch KIND NAME --type=merge -p '{"metadata":{"finalizers":null}}'``. The
  kubernetes backend needs no finalizer: ownerReferences let the garbage collector remove
  the backing objects; the controller, on the DELETED event, revokes the clients' RBAC
  first and then recomputes the Lease grants (the admission confinement goes last).

Order of grants (spec.clients): on a create or an addition the confinement (the Lease
grants the admission policy reads) is written before the RBAC grant it confines; on a
removal the RBAC grant is revoked while the old confinement still holds, and the
confinement is lifted only afterwards — never a moment with the grant and no fence.

Not guaranteed: status while the operator is down (a standby takes over within the
lease duration and re-reads the live state).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from kubecoord.operator import backing, kubeapi, lease_grants, metrics, rbac
from kubecoord.operator.controller.status import AfterSnapshot, KindHooks, LiveResource, MirrorFactory, controller
from kubecoord.operator.handlers._cleanup import purge
from kubecoord.operator.handlers._history import History
from kubecoord.operator.model import BackendSpec
from kubecoord.wire.crd import GROUP, KINDS, VERSION

__all__ = ["AfterSnapshot", "History", "LiveResource", "MirrorFactory", "register"]
"""What the kind modules use; History lives in _history.py, the finalizer's purge in _cleanup.py."""

log = logging.getLogger("kubecoord.operator")

RECONCILE_BACKOFF_SECONDS = 5.0
"""Retry of a failed reconcile (kopf's default is 60 s): the resource is not Ready until it
succeeds, so a passing API-server hiccup should not keep clients out for a minute."""
CLEANUP_SECONDS = 10.0
CLEANUP_RETRIES = 3
CLEANUP_BACKOFF_SECONDS = 3.0


def register(plural: str, factory: MirrorFactory, after_snapshot: AfterSnapshot | None = None) -> None:
    """Register the create/resume/update, event and delete handlers of one kind, and its
    status hooks with the controller."""
    kind = KINDS[plural]
    controller.register(KindHooks(plural, factory, after_snapshot))

    @kopf.on.resume(GROUP, VERSION, plural, id="reconcile", backoff=RECONCILE_BACKOFF_SECONDS)
    @kopf.on.create(GROUP, VERSION, plural, id="reconcile", backoff=RECONCILE_BACKOFF_SECONDS)
    @kopf.on.update(GROUP, VERSION, plural, id="reconcile", field="spec", backoff=RECONCILE_BACKOFF_SECONDS)
    async def reconcile(body: kopf.Body, spec: kopf.Spec, reason: str, old: Any = None, **_: Any) -> None:
        namespace = body["metadata"]["namespace"]
        clients = set(spec.get("clients") or [])
        previous = dict(old or {}) if reason == "update" else {}  # field="spec": kopf passes the old spec
        removed = set(previous.get("clients") or []) - clients
        foreign: list[str] = []
        try:
            kv_shards = None
            if spec.get("backend", "kubernetes") == "kubernetes":
                ensured = await backing.ensure_owned(dict(body))
                kv_shards = sum(obj["kind"] == "ConfigMap" for obj in ensured.objects) or None
                foreign = ensured.foreign
            # A new resource without clients grants nothing and confines nobody: no request.
            fresh = reason == "create" and not clients
            if kind in lease_grants.KINDS and not fresh:
                # The confinement first (the old clients' too while they still hold RBAC),
                # then the grant it confines.
                keep = {**dict(body), "kind": kind, "spec": previous} if removed else None
                await lease_grants.reconcile(namespace, keep=keep)
            if not fresh:
                await rbac.reconcile(dict(body), kv_shards=kv_shards, withhold=foreign)
            if kind in lease_grants.KINDS and removed:
                await lease_grants.reconcile(namespace)  # the RBAC grant is gone: lift the old confinement
        except Exception as error:
            metrics.RECONCILES.labels(kind, "error").inc()
            metrics.ERRORS.labels(kind, "reconcile").inc()
            controller.mark_failed((plural, namespace, body["metadata"]["name"]), error)
            raise
        metrics.RECONCILES.labels(kind, "ok").inc()
        controller.mark_reconciled((plural, namespace, body["metadata"]["name"]),
                                   body["metadata"].get("generation"), foreign)

    @kopf.on.event(GROUP, VERSION, plural)
    async def observe(type: str | None, body: kopf.Body, **_: Any) -> None:
        # async: on kopf's loop, where the controller's cache and queue live (kopf runs a
        # synchronous handler in an executor thread).
        controller.observe(type, dict(body))

    @kopf.on.delete(GROUP, VERSION, plural, id="cleanup", when=_outside_kubernetes,
                    retries=CLEANUP_RETRIES, backoff=CLEANUP_BACKOFF_SECONDS)
    async def cleanup(body: kopf.Body, spec: kopf.Spec, name: str, namespace: str | None, retry: int,
                      **_: Any) -> None:
        # The finalizer's handler, only where Kubernetes cannot clean up (ZooKeeper znodes).
        # Bounded: CLEANUP_SECONDS per try, CLEANUP_RETRIES tries; then kopf gives up, logs the
        # failure and removes the finalizer, so a dead ensemble never blocks deletion forever.
        namespace = str(namespace)
        backend = BackendSpec.from_spec(dict(spec), namespace=namespace)
        try:
            deleted = await asyncio.wait_for(purge(backend, kind, name), timeout=CLEANUP_SECONDS)
        except Exception as error:
            metrics.ERRORS.labels(kind, "delete").inc()
            last = retry + 1 >= CLEANUP_RETRIES
            log.log(logging.ERROR if last else logging.INFO,
                    "cleanup gave up: znodes may remain" if last else "cleanup failed; will retry",
                    extra={"kind": kind, "resource": f"{namespace}/{name}", "try": retry + 1,
                           "error": f"{type(error).__name__}: {error}"[:300]})
            raise
        metrics.forget(namespace, name)
        log.info("cleaned up", extra={"kind": kind, "resource": f"{namespace}/{name}", "deleted": deleted})

    @kopf.on.delete(GROUP, VERSION, plural, id="cleanup-owned", when=_on_kubernetes, optional=True)
    async def cleanup_owned(body: kopf.Body, name: str, namespace: str | None, **_: Any) -> None:
        # No finalizer on the kubernetes backend: every backing object carries an
        # ownerReference, so Kubernetes' garbage collector removes it with the resource. When
        # the operator happens to see the deletion it also deletes what is its own at once.
        namespace = str(namespace)
        try:
            deleted = await backing.delete_all(dict(body))
        except (kubeapi.ApiException, OSError) as error:
            log.info("cleanup left to the garbage collector", extra={"kind": kind, "error": str(error)[:300]})
            deleted = 0
        if kind in lease_grants.KINDS:
            try:
                await lease_grants.reconcile(namespace)
            except (kubeapi.ApiException, OSError) as error:
                log.info("lease grants left to the next reconcile", extra={"kind": kind, "error": str(error)[:300]})
        metrics.forget(namespace, name)
        log.info("cleaned up", extra={"kind": kind, "resource": f"{namespace}/{name}", "deleted": deleted})


def _on_kubernetes(spec: kopf.Spec, **_: Any) -> bool:
    return bool(spec.get("backend", "kubernetes") == "kubernetes")


def _outside_kubernetes(spec: kopf.Spec, **_: Any) -> bool:
    return not _on_kubernetes(spec)
