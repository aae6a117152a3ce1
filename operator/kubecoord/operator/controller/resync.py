"""The periodic resync: every RESYNC_SECONDS, enqueue what drifted from its spec without
an event saying so.

One pass: whether Group clients are confined (one read of the admission policy; on a
change of verdict every Group's grants are written again); the resources whose Role or
RoleBinding differs from what their spec implies (one list of the operator's Roles and
one of its RoleBindings per namespace: a stale grant — a subject not in spec.clients,
written by a deposed replica's late request or by hand — is removed within one period);
on kubernetes the resources whose backing objects the informer cache shows missing or
foreign (a dict lookup each, no request), and each namespace's Lease-grants ConfigMap
(lease_grants.check_drift). It only enqueues keys and forgets what was written for them;
the workers do the writing.

Not guaranteed: a resync while a check's request fails (logged; the next pass tries again).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from kubecoord.operator import confinement, kubeapi, lease_grants, metrics, rbac
from kubecoord.operator.controller import spec as spec_writer
from kubecoord.operator.controller.cache import Entry
from kubecoord.operator.controller.owners import Key
from kubecoord.operator.controller.workqueue import WorkQueue
from kubecoord.wire.crd import KINDS

log = logging.getLogger("kubecoord.operator")

RESYNC_SECONDS = 60.0
"""How often every resource's backing objects (informer cache) and grants (a list per
namespace) are checked against its spec (``kubecoord operator --resync-seconds``)."""


class Resynced(Protocol):
    """What a resync reads and resets of the controller (controller.reconciler's)."""

    queue: WorkQueue[Key]
    resync_seconds: float
    bodies: dict[Key, dict[str, Any]]
    entries: dict[Key, Entry]
    reconciled: dict[Key, int | None]
    applied: dict[Key, dict[str, Any]]
    granted: dict[Key, dict[str, Any] | None]
    unconfined: dict[Key, str]

    def all_cached(self, key: Key, entry: Entry) -> bool: ...


async def run(controller: Resynced) -> None:
    """Resync every ``controller.resync_seconds``, until cancelled."""
    while True:
        await asyncio.sleep(controller.resync_seconds)
        await check_confinement(controller)
        await check_grants(controller)
        await check_backing(controller)


async def check_backing(controller: Resynced) -> None:
    """Enqueue the resources whose backing objects the informer cache shows missing or
    foreign; check each namespace's Lease grants once."""
    checked: set[str] = set()
    for key, entry in list(controller.entries.items()):
        if entry.backend.backend != "kubernetes" or key not in controller.bodies:
            continue
        if entry.foreign or not controller.all_cached(key, entry):
            controller.queue.add(key)
        if KINDS[key[0]] in lease_grants.KINDS and key[1] not in checked:
            checked.add(key[1])
            try:
                await lease_grants.check_drift(key[1])
            except (kubeapi.ApiException, OSError) as error:
                log.info("lease grants check failed", extra={"namespace": key[1], "error": str(error)[:300]})
        await asyncio.sleep(0)  # thousands of resources: let the workers run between them


async def check_confinement(controller: Resynced) -> None:
    """Read whether Group clients are confined; on a change, write every Group's grants again."""
    try:
        verdict = await confinement.verdict(fresh=True)
    except (kubeapi.ApiException, OSError) as error:
        log.info("confinement check failed", extra={"error": str(error)[:300]})
        return
    stale = []
    for key, body in list(controller.bodies.items()):
        spec = body.get("spec") or {}
        if key[0] != "groups" or not spec.get("clients") or not spec_writer.on_kubernetes(spec):
            continue
        if key in controller.granted and (key in controller.unconfined) == verdict.confined:
            stale.append(key)  # written under the other verdict
    if stale:
        log.warning("Group clients' confinement changed: writing those Groups' grants again",
                    extra={"confined": verdict.confined, "groups": len(stale), "why": verdict.reason[:300]})
    for key in stale:
        controller.reconciled.pop(key, None)
        controller.queue.add(key)


async def check_grants(controller: Resynced) -> None:
    """Re-write the spec of every resource whose Role or RoleBinding differs from what
    its spec implies (rbac.drifted): one list of each kind per namespace."""
    bodies, granted = controller.bodies, controller.granted
    namespaces: dict[str, list[Key]] = {}
    for key in list(granted):
        if key in bodies and controller.reconciled.get(key, -1) == bodies[key]["metadata"].get("generation"):
            namespaces.setdefault(key[1], []).append(key)
    for namespace, keys in sorted(namespaces.items()):
        try:
            roles = await kubeapi.list_objects(rbac.RBAC_API, "roles", namespace, lease_grants.MANAGED_SELECTOR)
            bindings = await kubeapi.list_objects(rbac.RBAC_API, "rolebindings", namespace,
                                                  lease_grants.MANAGED_SELECTOR)
        except (kubeapi.ApiException, OSError) as error:
            log.info("grants check failed", extra={"namespace": namespace, "error": str(error)[:300]})
            continue
        by_name = {obj["metadata"]["name"]: obj for obj in roles}
        bound = {obj["metadata"]["name"]: obj for obj in bindings}
        for key in keys:
            body = bodies.get(key)
            if body is None or key not in granted:
                continue
            name = rbac.role_name(body)
            why = rbac.drifted(body, granted[key], by_name.get(name), bound.get(name))
            if why is None:
                continue
            metrics.ERRORS.labels(KINDS[key[0]], "grants").inc()
            log.warning("grants differ from the spec: writing them again",
                        extra={"resource": f"{namespace}/{key[2]}", "why": why})
            # Written again as after a restart: the RoleBinding's subjects are read as
            # the old clients, so a removed subject's confinement is lifted only after.
            controller.reconciled.pop(key, None)
            controller.applied.pop(key, None)
            granted.pop(key, None)
            controller.queue.add(key)
        await asyncio.sleep(0)
