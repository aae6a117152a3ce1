"""Whether the chart's admission policy confines Group clients, and what the operator
grants them accordingly: fail closed.

A Group's ``spec.clients`` need to create, update and delete member Leases whose names
RBAC cannot know, so their Role grants those verbs on every Lease of the namespace
(kubecoord.operator.rbac); only the chart's ValidatingAdmissionPolicy (fed by
kubecoord.operator.lease_grants) narrows them to their own kubecoord Leases. Without it a
Group client could write any Lease of the namespace — another application's election,
the operator's own HA Lease. So the operator grants those Lease writes only while
the policy is in force, as far as it can see — the ValidatingAdmissionPolicy POLICY
(``--confinement-policy``; the chart's is ``kubecoord-lease-grants``, one per cluster) and
the binding BINDING (``--confinement-binding``, default POLICY; the chart's is
``RELEASE-kubecoord-lease-grants``, one per release) that refers to it, denies
(validationActions Deny) and takes its parameters from the namespace's
``kubecoord-lease-grants`` ConfigMap, both present (admissionregistration v1, else
v1beta1) — or when told that unconfined Group clients are acceptable
(``--allow-unconfined-group-clients``, the chart's ``rbac.allowUnconfinedGroupClients``;
default off). Otherwise a Group's clients get reads only (get, list, watch on Leases:
reads are never confined) and the Group is Ready=False, reason Unconfined, with a
message saying what to install.

The verdict is read at most every CHECK_SECONDS (two GETs) and on every resync; a change
(the policy installed or removed) makes the operator write every Group's grants again,
so a removed policy takes the Lease writes away within one resync period.
Not guaranteed: that the API server enforces a policy it serves (its
ValidatingAdmissionPolicy admission plugin can be disabled; on by default since 1.30),
nor that it sees the policy's parameters (kube-apiserver v1.32 stops its ConfigMap
parameter informer for good once the last binding of a policy with ConfigMap parameters
is removed: a policy installed again afterwards never finds a ConfigMap created later,
and admits; docs/operator.md, "Group clients fail closed"), nor confinement between the
policy's removal and the next check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kubecoord.operator import kubeapi

POLICY = "kubecoord-lease-grants"
"""The chart's policy name (whatever the release), and its binding's for the release name
``kubecoord`` (the default)."""
PARAMETERS = "kubecoord-lease-grants"
"""The binding's paramRef name: kubecoord.operator.lease_grants.CONFIGMAP."""
CHECK_SECONDS = 10.0
API_VERSIONS = ("admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1")


@dataclass(frozen=True)
class Verdict:
    confined: bool
    """Group clients may be granted namespace-wide Lease writes (confined, or accepted)."""
    reason: str
    """Why not (what to install), or how (for the log)."""


@dataclass
class _Settings:
    policy: str = POLICY
    binding: str = POLICY
    allow_unconfined: bool = False


settings = _Settings()
_cached: tuple[float, Verdict] | None = None


def configure(*, policy: str = POLICY, binding: str | None = None, allow_unconfined: bool = False) -> None:
    """What ``kubecoord operator`` was told (its flags; ``binding`` None: named as the policy);
    forgets the cached verdict."""
    global _cached
    settings.policy, settings.allow_unconfined = policy, allow_unconfined
    settings.binding = binding or policy
    _cached = None


async def verdict(*, fresh: bool = False) -> Verdict:
    """Whether Group clients may get namespace-wide Lease writes now (cached CHECK_SECONDS)."""
    global _cached
    if settings.allow_unconfined:
        return Verdict(True, "unconfined Group clients accepted (--allow-unconfined-group-clients)")
    now = time.monotonic()
    if not fresh and _cached is not None and now - _cached[0] < CHECK_SECONDS:
        return _cached[1]
    result = await _check(settings.policy, settings.binding)
    _cached = (now, result)
    return result


def _missing(what: str) -> Verdict:
    return Verdict(False, (
        f"{what}: the operator grants this Group's spec.clients no Lease writes, since without the "
        "policy they could write every Lease of the namespace. Install the chart with "
        "rbac.confineGroupClients=true (Kubernetes 1.30+, or 1.28-1.29 with the v1beta1 API enabled), "
        "or accept unconfined Group clients: rbac.allowUnconfinedGroupClients=true "
        "(kubecoord operator --allow-unconfined-group-clients)"))


async def _check(name: str, bound_by: str) -> Verdict:
    for api_version in API_VERSIONS:
        base = f"/apis/{api_version}"
        try:
            policy = await kubeapi.acall("GET", f"{base}/validatingadmissionpolicies/{name}") or {}
            binding = await kubeapi.acall("GET", f"{base}/validatingadmissionpolicybindings/{bound_by}") or {}
        except kubeapi.ApiException as error:
            if error.status == 404:
                continue  # not there in this version (or not served): the next one
            if error.status == 403:
                return _missing(f"the operator may not read ValidatingAdmissionPolicy {name} ({error.status})")
            raise
        spec, bound = policy.get("spec") or {}, binding.get("spec") or {}
        problems = []
        if (spec.get("paramKind") or {}).get("kind") != "ConfigMap":
            problems.append("its paramKind is not ConfigMap")
        if bound.get("policyName") != name:
            problems.append(f"binding {bound_by} does not refer to it")
        if "Deny" not in (bound.get("validationActions") or []):
            problems.append(f"binding {bound_by} does not deny")
        if (bound.get("paramRef") or {}).get("name") != PARAMETERS:
            problems.append(f"binding {bound_by} does not read the ConfigMap {PARAMETERS}")
        if problems:
            return _missing(f"ValidatingAdmissionPolicy {name} is not the chart's ({'; '.join(problems)})")
        return Verdict(True, f"confined by ValidatingAdmissionPolicy {name}, binding {bound_by} ({api_version})")
    return _missing(f"no ValidatingAdmissionPolicy {name} and binding {bound_by}")
