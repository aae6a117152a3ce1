"""Which Leases each Group client may write: the parameters of the chart's admission policy.

RBAC cannot confine a Group's clients to that group's member Leases: a member creates its
own Lease, and ``resourceNames`` cannot restrict ``create`` (nor a label-selected list), so
rbac.py grants a Group's ``spec.clients`` every verb on the namespace's Leases. The chart
therefore installs a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1,
charts/kubecoord/templates/admissionpolicy.yaml) on Lease CREATE, UPDATE and DELETE whose
parameters are one ConfigMap per namespace, ``kubecoord-lease-grants``, kept here:

    data:
      SERVICE_ACCOUNT: "GROUP.m.* GROUP-gc GROUP-gc.epoch ELECTION ELECTION.epoch ..."

- a key per ServiceAccount listed in ``spec.clients`` of a kubernetes-backed Group of the
  namespace; its entries are every Lease its kubecoord grants cover: for each such Group,
  the member Leases (prefix ``GROUP.m.``, an entry ending in ``*``) and the group
  coordinator's election Lease (``GROUP-gc``) and its epochs' high-water mark
  (``GROUP-gc.epoch``); for each kubernetes-backed LeaderElection that also lists it,
  that election's Lease and its mark (space-separated, sorted);
- a request by ``system:serviceaccount:NS:SA`` whose SA is a key may write only those
  Leases; the server answers 403 (reason Forbidden) otherwise, which the client raises as
  PermissionDeniedError;
- identities that are not keys (the operator, a client-go application with RBAC of its
  own, an SA that is only an election's or a store's client: RBAC already confines those
  by name) are not affected, nor is a namespace without the ConfigMap
  (``parameterNotFoundAction: Allow``).

The rule's limit: an SA listed as a Group client is confined to kubecoord Leases in that
namespace, whatever other Role it also holds — give other applications their own
ServiceAccount. Reads are not confined (a Group's clients list and watch the namespace's
Leases by label, which RBAC can only grant namespace-wide).

Order and consistency: the ConfigMap is written before the Role and RoleBinding that
grant the Lease verbs, and recomputed from a fresh list of the namespace's Groups,
LeaderElections and kubecoord RoleBindings on every create, spec change, resume and
deletion of either kind, one namespace at a time (a per-namespace lock: the last writer
has seen every change before it). A resource's clients here are its ``spec.clients``
*and* the subjects its RoleBinding binds now, so the confinement of a removed client
holds until its RBAC grant is gone, whoever recomputes: the resource's own spec write,
or any other resource's in the same namespace (after a restart, another Group's resume
must not lift a removed client's confinement before its RoleBinding is updated). A
RoleBinding whose resource is gone (deleted, not yet collected) confines its
subjects too, as a kubernetes-backed resource would. The ConfigMap carries a
(non-controller) ownerReference to every contributing Group, so the garbage collector
removes it with the last of them; with no Group client left the operator deletes it.
Not guaranteed: confinement while the ConfigMap is missing (someone deleted it; the next
reconcile or drift check re-creates it), or where the API server's
ValidatingAdmissionPolicy plugin is disabled (on by default since Kubernetes 1.30).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

from kubecoord.operator import kubeapi
from kubecoord.operator.model import owner_reference
from kubecoord.operator.rbac import RBAC_API, role_name_prefix
from kubecoord.wire import object_names
from kubecoord.wire.crd import API_VERSION
from kubecoord.wire.group_record import derived_name

MANAGED_SELECTOR = f"{object_names.MANAGED_BY_LABEL}={object_names.MANAGED_BY}"
"""The operator's RoleBindings (kubecoord.operator.rbac labels its Roles and RoleBindings)."""
CONFIGMAP = "kubecoord-lease-grants"
"""The policy binding's paramRef name (the chart's admissionpolicy.yaml says the same)."""
KINDS = ("Group", "LeaderElection")
"""The kinds whose clients' entries live in the ConfigMap (the others grant no Lease)."""
PREFIX_MARK = "*"

_locks: dict[str, asyncio.Lock] = {}
_written: dict[str, dict[str, str] | None] = {}
"""namespace -> the data last written (None: deleted), for the cheap drift check."""
_checked: dict[str, float] = {}
_computed_at: dict[str, float] = {}
"""namespace -> when the last recompute began listing (monotonic)."""
_owners: dict[str, set[str]] = {}
DRIFT_SECONDS = 10.0
"""At most one drift check (one GET) per namespace this often, however many Groups it has."""


def _on_kubernetes(body: dict[str, Any]) -> bool:
    spec = body.get("spec") or {}
    return bool(spec.get("backend", "kubernetes") == "kubernetes") and not body["metadata"].get("deletionTimestamp")


def _clients(body: dict[str, Any]) -> set[str]:
    return set((body.get("spec") or {}).get("clients") or [])


def grants(groups: list[dict[str, Any]], elections: list[dict[str, Any]]) -> dict[str, str]:
    """ServiceAccount -> its Lease names and prefixes (space-separated, sorted); only Group clients."""
    entries: dict[str, set[str]] = defaultdict(set)
    for group in filter(_on_kubernetes, groups):
        name = group["metadata"]["name"]
        for account in _clients(group):
            coordinator = object_names.election_lease_name(derived_name(name))
            entries[account] |= {object_names.member_lease_prefix(name) + PREFIX_MARK,
                                 coordinator, object_names.epoch_lease_name(coordinator)}
    for election in filter(_on_kubernetes, elections):
        lease = object_names.election_lease_name(election["metadata"]["name"])
        for account in _clients(election) & entries.keys():
            entries[account] |= {lease, object_names.epoch_lease_name(lease)}
    return {account: " ".join(sorted(names)) for account, names in sorted(entries.items())}


def with_bound_clients(
    groups: list[dict[str, Any]], elections: list[dict[str, Any]], bindings: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The resources with each one's clients widened to the ServiceAccounts its RoleBinding
    binds now; a RoleBinding whose resource is not listed (deleted, not yet collected)
    stands for a kubernetes-backed resource of its name with those clients."""
    bound: dict[tuple[str, str], set[str]] = {}
    for binding in bindings:
        name = str(binding["metadata"]["name"])
        for kind in KINDS:
            prefix = role_name_prefix(kind)
            if name.startswith(prefix):
                namespace = binding["metadata"].get("namespace")
                bound[(kind, name[len(prefix):])] = {
                    str(s.get("name")) for s in binding.get("subjects") or []
                    if s.get("kind") == "ServiceAccount" and s.get("namespace", namespace) == namespace}
    widened: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for body in [*groups, *elections]:
        kind, name, spec = body["kind"], body["metadata"]["name"], body.get("spec") or {}
        accounts = bound.pop((kind, name), set())
        if spec.get("backend", "kubernetes") != "kubernetes":
            widened[kind].append(body)  # its binding grants no Lease: nothing to confine
            continue
        if body["metadata"].get("deletionTimestamp"):
            widened[kind].append(body)  # confines nobody itself; its binding still does, below
            bound[(kind, name)] = accounts
            continue
        if accounts - _clients(body):
            body = {**body, "spec": {**spec, "clients": sorted(_clients(body) | accounts)}}
        widened[kind].append(body)
    for (kind, name), accounts in sorted(bound.items()):
        if accounts:
            widened[kind].append({"kind": kind, "metadata": {"name": name}, "spec": {"clients": sorted(accounts)}})
    return widened["Group"], widened["LeaderElection"]


def allows(entries: str, lease: str) -> bool:
    """What the policy's CEL expression decides, in Python (tests and documentation)."""
    return any(lease.startswith(entry[:-1]) if entry.endswith(PREFIX_MARK) else lease == entry
               for entry in entries.split())


def configmap(namespace: str, data: dict[str, str], owners: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP,
            "namespace": namespace,
            "labels": {object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY},
            # Not a controller reference: several Groups share the object; GC removes it
            # when the last of them is gone.
            "ownerReferences": [{**owner_reference(body), "controller": False} for body in owners],
        },
        "data": data,
    }


async def reconcile(namespace: str) -> dict[str, str] | None:
    """Recompute the namespace's ConfigMap from its Groups, LeaderElections and their
    RoleBindings; the data written. A client removed from a spec stays confined while its
    RoleBinding still binds it: call again once the RBAC grant is revoked to lift it.

    Calls queued behind the lock (an operator resuming thousands of resources) are
    coalesced: a recompute that began listing after a call was made has seen that call's
    change, so the call returns at once instead of listing and writing again.
    """
    requested = time.monotonic()
    lock = _locks.setdefault(namespace, asyncio.Lock())
    async with lock:
        if _computed_at.get(namespace, float("-inf")) >= requested:
            return _written.get(namespace)
        began = time.monotonic()
        data = await _recompute(namespace)
        _computed_at[namespace] = began
        return data


async def _recompute(namespace: str) -> dict[str, str]:
    groups = await kubeapi.list_objects(API_VERSION, "groups", namespace, "")
    elections = await kubeapi.list_objects(API_VERSION, "leaderelections", namespace, "")
    bindings = await kubeapi.list_objects(RBAC_API, "rolebindings", namespace, MANAGED_SELECTOR)
    for body in groups:
        body.setdefault("kind", "Group")
    for body in elections:
        body.setdefault("kind", "LeaderElection")
    groups, elections = with_bound_clients(groups, elections, bindings)
    data = grants(groups, elections)
    path = kubeapi.collection_path("v1", "configmaps", namespace)
    if not data:
        if namespace in _written and _written[namespace] is None:
            return data  # deleted already (the drift check notices one made by others)
        try:
            await kubeapi.acall("DELETE", f"{path}/{CONFIGMAP}")
        except kubeapi.ApiException as error:
            if error.status != 404:
                raise
        _written[namespace] = None
        return data
    owners = list({g["metadata"]["uid"]: g for g in groups
                   if _on_kubernetes(g) and _clients(g) and g["metadata"].get("uid")}.values())
    uids = {g["metadata"]["uid"] for g in owners}
    if _written.get(namespace) == data and _owners.get(namespace) == uids:
        return data  # what the API has (the drift check notices edits by others)
    body = configmap(namespace, data, owners)
    try:
        await kubeapi.acall("POST", path, body)
    except kubeapi.ApiException as error:
        if error.status != 409:
            raise
        # A replace, not a merge patch: keys of accounts no longer listed must go.
        await kubeapi.acall("PUT", f"{path}/{CONFIGMAP}", body)
    _written[namespace], _owners[namespace] = data, uids
    return data


async def check_drift(namespace: str) -> None:
    """Re-create or correct the ConfigMap when it differs from what was last written (one GET
    per namespace per DRIFT_SECONDS)."""
    now = time.monotonic()
    if now - _checked.get(namespace, -DRIFT_SECONDS) < DRIFT_SECONDS:
        return
    if namespace in _written and _written[namespace] is None:
        return  # no Group client here: nothing of ours to check (no request while idle)
    _checked[namespace] = now
    path = f"{kubeapi.collection_path('v1', 'configmaps', namespace)}/{CONFIGMAP}"
    try:
        current = (await kubeapi.acall("GET", path) or {}).get("data") or {}
    except kubeapi.ApiException as error:
        if error.status != 404:
            raise
        current = None
    if namespace not in _written or current != _written[namespace]:
        _written.pop(namespace, None)  # what the API has is not what we wrote: write again
        _owners.pop(namespace, None)
        await reconcile(namespace)
