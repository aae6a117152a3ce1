"""A Role and RoleBinding per resource, granting the ServiceAccounts in ``spec.clients``
exactly the verbs a kubecoord client needs on that resource's backing objects.

==============  ========================================================================
resource        rules (kubernetes backend; every kind also gets ``get`` on the resource
                itself, so that clients can bind by name)
==============  ========================================================================
LeaderElection  leases NAME and NAME.epoch (its epochs' high-water mark): get, list,
                watch, update, patch (the operator creates both, so clients need no
                ``create``)
Group           leases: create, get, list, watch, update, patch, delete — members create
                their own Lease, whose name RBAC cannot know in advance (resourceNames
                cannot restrict ``create`` or a label selector), so this rule covers the
                namespace's Leases (the group coordinator's election NAME-gc and its
                mark NAME-gc.epoch too); the
                writes only while the chart's admission policy confines them or
                unconfined clients are accepted (kubecoord.operator.confinement), else
                get, list, watch only;
                configmaps kubecoord-kv.NAME-gc (the group coordinator's record, created
                by the operator): get, list, watch, update, patch; get on the
                leaderelection and kvstore NAME-gc (clients look them up; 404 is fine)
KVStore         configmaps kubecoord-kv.NAME and its other shards kubecoord-kv.NAME.I (by
                name: the operator creates every shard): get, list, watch, update, patch;
                clients list and watch each with the field selector metadata.name=NAME,
                the only list/watch a grant by resourceNames authorizes
==============  ========================================================================

On the other backends only the ``get`` on the resource is granted (ZooKeeper ACLs and
etcd's users are not managed by the operator), and ``get`` on the Secret of the
connection's credentials when the spec names one (``spec.etcd.secretName``): a client
bound by name connects with them. Both objects carry an ownerReference to the resource, so
they go when it goes; an empty ``spec.clients`` deletes them.
"""

from __future__ import annotations

from typing import Any

from kubecoord.operator import kubeapi
from kubecoord.operator.model import owner_reference, size_limit_bytes
from kubecoord.wire import object_names
from kubecoord.wire.crd import GROUP, PLURALS
from kubecoord.wire.group_record import derived_name
from kubecoord.wire.kv_shards import shard_count_for

RBAC_API = "rbac.authorization.k8s.io/v1"
READ_WRITE = ["get", "list", "watch", "update", "patch"]
READ_ONLY = ["get", "list", "watch"]


def role_name_prefix(kind: str) -> str:
    return f"kubecoord-{kind.lower()}-"


def role_name(body: dict[str, Any]) -> str:
    """The Role's and the RoleBinding's name (lease_grants reads the resource back from it)."""
    return role_name_prefix(body["kind"]) + str(body["metadata"]["name"])


def rules(
    body: dict[str, Any], *, kv_shards: int | None = None, withhold: list[str] | None = None,
    confined: bool = True,
) -> list[dict[str, Any]]:
    """The Role's rules; ``kv_shards`` is a KVStore's recorded shard count (else from sizeLimit);
    ``withhold``: "Kind name" of same-named objects the operator did not create — nothing
    is granted on them (a user denied on a Lease must not get it by naming a resource after it);
    ``confined``: whether a Group's clients may get namespace-wide Lease writes
    (kubecoord.operator.confinement; False: reads only)."""
    result = _rules(body, kv_shards=kv_shards, confined=confined)
    held = {entry.split(" ", 1)[1] for entry in withhold or [] if " " in entry}
    # A Lease withheld withholds its epochs' high-water mark too: the mark is only of use
    # with the Lease it keeps (and an election that cannot take its Lease issues no epoch).
    held |= {object_names.epoch_lease_name(entry.split(" ", 1)[1])
             for entry in withhold or [] if entry.startswith("Lease ")}
    if not held:
        return result
    kept = []
    for rule in result:
        names = rule.get("resourceNames")
        if names and rule["apiGroups"] != [GROUP]:
            names = [name for name in names if name not in held]
            if not names:
                continue
            rule = {**rule, "resourceNames": names}
        kept.append(rule)
    return kept


def _rules(body: dict[str, Any], *, kv_shards: int | None = None, confined: bool = True) -> list[dict[str, Any]]:
    kind, name = body["kind"], body["metadata"]["name"]
    result = [_rule(GROUP, PLURALS[kind], ["get"], name)]
    spec = dict(body.get("spec") or {})
    backend = str(spec.get("backend", "kubernetes"))
    if backend != "kubernetes":
        secret = (spec.get(backend) or {}).get("secretName")
        if secret:  # the connection's credentials (kubecoord.resources.credentials), by name
            result.append(_rule("", "secrets", ["get"], str(secret)))
        return result
    if kind == "LeaderElection":
        lease = object_names.election_lease_name(name)
        result.append(_rule("coordination.k8s.io", "leases", READ_WRITE, lease, object_names.epoch_lease_name(lease)))
    elif kind == "Group":
        # Writes only while the admission policy confines them (fail closed): reads are
        # never confined, so they are granted either way.
        verbs = ["create", *READ_WRITE, "delete"] if confined else READ_ONLY
        result.append(_rule("coordination.k8s.io", "leases", verbs))
        # The group coordinator (kubecoord.group_coordinator): its election and store NAME-gc. A
        # client looks each name up as a resource first (404: no binding), hence the gets.
        coordinator = derived_name(name)
        result.append(_rule("", "configmaps", READ_WRITE, object_names.store_shard_name(coordinator, 0)))
        result.append(_rule(GROUP, "leaderelections", ["get"], coordinator))
        result.append(_rule(GROUP, "kvstores", ["get"], coordinator))
    elif kind == "KVStore":
        shards = kv_shards or shard_count_for(size_limit_bytes(dict(body.get("spec") or {})))
        result.append(_rule("", "configmaps", READ_WRITE, *object_names.store_shard_names(name, shards)))
    return result


def _rule(api_group: str, plural: str, verbs: list[str], *names: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": [api_group], "resources": [plural], "verbs": verbs}
    if names:
        rule["resourceNames"] = list(names)
    return rule


def objects(body: dict[str, Any], *, kv_shards: int | None = None, withhold: list[str] | None = None,
            confined: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Role and the RoleBinding of a resource."""
    metadata = {
        "name": role_name(body),
        "namespace": body["metadata"]["namespace"],
        "labels": {object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY},
        "ownerReferences": [owner_reference(body)],
    }
    clients = sorted(set((body.get("spec") or {}).get("clients") or []))
    role = {"apiVersion": RBAC_API, "kind": "Role", "metadata": metadata,
            "rules": rules(body, kv_shards=kv_shards, withhold=withhold, confined=confined)}
    binding = {
        "apiVersion": RBAC_API,
        "kind": "RoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name(body)},
        "subjects": [
            {"kind": "ServiceAccount", "name": client, "namespace": body["metadata"]["namespace"]} for client in clients
        ],
    }
    return role, binding


async def reconcile(body: dict[str, Any], *, kv_shards: int | None = None,
                    withhold: list[str] | None = None, confined: bool = True) -> dict[str, Any] | None:
    """Create, update or (with no clients) delete the Role and RoleBinding; returns the Role
    written (None: revoked), what ``drifted`` later compares the API's objects with."""
    role, binding = objects(body, kv_shards=kv_shards, withhold=withhold, confined=confined)
    if not binding["subjects"]:
        await revoke(body)
        return None
    await kubeapi.apply(role)
    await kubeapi.apply(binding)
    return role


def _rule_key(rule: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(sorted(rule.get(field) or [])) for field in ("apiGroups", "resources", "verbs",
                                                                     "resourceNames", "nonResourceURLs"))


def _subjects(binding: dict[str, Any]) -> set[tuple[str, str, str]]:
    namespace = binding["metadata"].get("namespace", "")
    return {(str(s.get("kind")), str(s.get("name")), str(s.get("namespace") or namespace))
            for s in binding.get("subjects") or []}


def drifted(body: dict[str, Any], written: dict[str, Any] | None, role: dict[str, Any] | None,
            binding: dict[str, Any] | None) -> str | None:
    """Why the API's Role and RoleBinding of ``body`` (None: absent) differ from what its spec
    implies — ``written``: the Role the operator last wrote for that spec (None: revoked) —
    or None when they agree. A subject the spec does not list (a deposed replica's late
    write, a hand edit) is a difference, and so is any rule not written."""
    _, expected = objects(body)
    if written is None:
        present = [kind for kind, obj in (("Role", role), ("RoleBinding", binding)) if obj is not None]
        return f"{' and '.join(present)} present, spec.clients grants nothing" if present else None
    if role is None or binding is None:
        return "Role or RoleBinding missing"
    if sorted(map(_rule_key, role.get("rules") or [])) != sorted(map(_rule_key, written["rules"])):
        return "Role rules differ from the spec's"
    extra = _subjects(binding) - _subjects(expected)
    if extra:
        return "RoleBinding binds " + ", ".join(f"{kind} {name}" for kind, name, _ in sorted(extra)) + \
            " not in spec.clients"
    if _subjects(binding) != _subjects(expected):
        return "RoleBinding misses clients of spec.clients"
    if (binding.get("roleRef") or {}).get("name") != expected["roleRef"]["name"]:
        return "RoleBinding refers to another Role"
    return None


async def revoke(body: dict[str, Any]) -> None:
    """Delete the RoleBinding, then the Role (already gone counts as done)."""
    role, binding = objects(body)
    await kubeapi.delete(binding)
    await kubeapi.delete(role)
