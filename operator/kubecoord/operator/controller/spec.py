"""What a resource's spec asks the operator to write, done by the controller's workers.

The work queue does it, not a kopf create/resume/update handler, so that a created
resource costs no handler run of its own, no progress or last-handled annotation patch
and no second watch event for that patch: one POST per backing object and one status
write is what creating a resource costs. ``write`` runs when the cached
body's generation differs from the last generation written in this process (a create, a
spec change, or the first sight after the operator started: kopf's "resume").

- kubernetes backend: the backing objects (Lease, ConfigMaps) with an ownerReference,
  then the clients' confinement and RBAC grant (kubecoord.operator.rbac, lease_grants);
- other backends: the finalizer FINALIZER (the controller purges the backend's objects
  before removing it; kubecoord.operator.purge), then the RBAC grant.

Order of grants (spec.clients): on a create or an addition the confinement (the Lease
grants the admission policy reads) is written before the RBAC grant it confines; on a
removal the RBAC grant is revoked while the old confinement still holds, and the
confinement is lifted only afterwards — never a moment with the grant and no fence. The
confinement is computed from the clients the RoleBindings bind as well as the specs
(lease_grants), so no recompute — this resource's or another's, racing on another
worker or resuming after a restart — lifts it before the RoleBinding is updated. The
old clients are the previous spec this process wrote; after a restart (previous spec
unknown) the RoleBinding's subjects are read as the old clients (one GET), to know that
a lift is due once the RBAC grant is revoked.

Guarantees: idempotent (writing twice writes nothing new: POSTs answer 409 and are
checked, merge patches are no-ops); a resource created with no clients costs one POST
per backing object and nothing else here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubecoord.operator import backing, confinement, kubeapi, lease_grants, rbac
from kubecoord.wire.crd import GROUP, PLURALS

FINALIZER = f"{GROUP}/cleanup"
"""On resources whose backend Kubernetes cannot clean up (ZooKeeper, Cassandra, etcd): removed by
the controller once their objects are purged (kubecoord.operator.purge)."""


@dataclass
class Written:
    foreign: list[str] = field(default_factory=list)
    """"Kind name" of same-named objects the operator did not create (left untouched)."""
    pending: list[str] = field(default_factory=list)
    """"Kind name" of an earlier same-named resource's objects, replaced once collected."""
    unconfined: str | None = None
    """Why a Group's clients got no Lease writes (kubecoord.operator.confinement), if so."""
    role: dict[str, Any] | None = None
    """The clients' Role written (None: no clients, no Role or RoleBinding)."""


def on_kubernetes(spec: dict[str, Any]) -> bool:
    return bool(spec.get("backend", "kubernetes") == "kubernetes")


def fresh(body: dict[str, Any]) -> bool:
    """Never reconciled by any operator: a create (no status written yet)."""
    return (body.get("status") or {}).get("observedGeneration") is None


async def write(body: dict[str, Any], previous: dict[str, Any] | None) -> Written:
    """Write what ``body``'s spec asks for; ``previous``: the spec this process last wrote
    for it (None: unknown, or a create)."""
    kind, metadata = body["kind"], body["metadata"]
    spec = dict(body.get("spec") or {})
    namespace = metadata["namespace"]
    clients = set(spec.get("clients") or [])
    new = fresh(body) and previous is None
    result = Written()
    kv_shards = None
    if on_kubernetes(spec):
        ensured = await backing.ensure_owned(body)
        kv_shards = sum(obj["kind"] == "ConfigMap" for obj in ensured.objects) or None
        result.foreign, result.pending = ensured.foreign, ensured.pending
    elif FINALIZER not in (metadata.get("finalizers") or []):
        await _add_finalizer(body)
    if new and not clients:
        return result  # grants nothing, confines nobody: no request
    old_clients = set((previous or {}).get("clients") or [])
    if previous is None and not new and kind in lease_grants.KINDS:
        old_clients = await _bound_clients(body)
    removed = old_clients - clients
    if kind in lease_grants.KINDS:
        # The confinement first, then the grant it confines. The old clients stay confined
        # while the RoleBinding binds them (lease_grants reads it), whoever recomputes.
        await lease_grants.reconcile(namespace)
    confined = True
    if kind == "Group" and on_kubernetes(spec) and clients:
        verdict = await confinement.verdict()
        confined, result.unconfined = verdict.confined, None if verdict.confined else verdict.reason
    result.role = await rbac.reconcile(body, kv_shards=kv_shards, withhold=result.foreign, confined=confined)
    if kind in lease_grants.KINDS and removed:
        await lease_grants.reconcile(namespace)  # the RBAC grant is gone: lift the old confinement
    return result


async def _bound_clients(body: dict[str, Any]) -> set[str]:
    """The ServiceAccounts the resource's RoleBinding grants now (none if it has none)."""
    _, binding = rbac.objects(body)
    try:
        current = await kubeapi.acall("GET", kubeapi.object_path(binding).item)
    except kubeapi.ApiException as error:
        if error.status == 404:
            return set()
        raise
    return {str(subject.get("name")) for subject in (current or {}).get("subjects") or []
            if subject.get("kind") == "ServiceAccount"}


async def _add_finalizer(body: dict[str, Any]) -> None:
    await _set_finalizers(body, [*(body["metadata"].get("finalizers") or []), FINALIZER])


async def remove_finalizer(body: dict[str, Any]) -> None:
    """Let the API server delete the resource (its backend's objects are purged)."""
    kept = [name for name in body["metadata"].get("finalizers") or [] if name != FINALIZER]
    await _set_finalizers(body, kept)


async def _set_finalizers(body: dict[str, Any], finalizers: list[str]) -> None:
    # A merge patch replaces the whole list: the resourceVersion precondition makes a
    # concurrent change of the list (another controller's finalizer) a 409, retried.
    metadata = body["metadata"]
    collection = kubeapi.collection_path(body["apiVersion"], PLURALS[body["kind"]], metadata["namespace"])
    path = f"{collection}/{metadata['name']}"
    patch = {"metadata": {"finalizers": finalizers or None, "resourceVersion": metadata.get("resourceVersion")}}
    try:
        await kubeapi.acall("PATCH", path, patch, content_type=kubeapi.MERGE_PATCH)
    except kubeapi.ApiException as error:
        if error.status != 404:  # gone already: nothing to keep or release
            raise
