"""The life cycle every kubecoord resource shares, registered once per kind.

kopf watches each kind (one watch per kind) and hands every event to the status
controller (kubecoord.operator.controller.reconciler); nothing else of kopf runs per
resource: no create/update/resume/delete handler, so kopf writes no progress or
last-handled annotation and adds no finalizer of its own. The controller's workers do
the rest from the work queue:
- create / spec change / first sight after a start: the backing objects (kubernetes
  backend: Lease or ConfigMap with an ownerReference), the clients' Role and RoleBinding
  and the namespace's Lease grants (kubecoord.operator.controller.spec);
- status: the live state mirrored into status, drift repaired from the informer cache,
  Events posted;
- delete: the kubernetes backend needs no finalizer (ownerReferences let the garbage
  collector remove the backing objects); on the DELETED event the controller revokes the
  clients' RBAC first and then recomputes the Lease grants (the admission confinement
  goes last). On zookeeper, cassandra and etcd the controller's finalizer purges the backend's
  objects, bounded, then lets the resource go.

Not guaranteed: status while the operator is down (a standby takes over within the
lease duration and re-reads the live state).
"""

from __future__ import annotations

from typing import Any

import kopf

from kubecoord.operator.controller.reconciler import AfterSnapshot, KindHooks, MirrorFactory, controller
from kubecoord.wire.crd import GROUP, VERSION

__all__ = ["register"]


def register(plural: str, factory: MirrorFactory, after_snapshot: AfterSnapshot | None = None) -> None:
    """Register the watch of one kind and its status hooks with the controller."""
    controller.register(KindHooks(plural, factory, after_snapshot))

    @kopf.on.event(GROUP, VERSION, plural)
    async def observe(type: str | None, body: kopf.Body, **_: Any) -> None:
        # async: on kopf's loop, where the controller's cache and queue live (kopf runs a
        # synchronous handler in an executor thread).
        controller.observe(type, dict(body))
