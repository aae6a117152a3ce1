"""The resource types the emulator serves: built-ins and those defined by CRDs.

A ``ResourceType`` is one (group, version, plural) as discovery lists it. Objects are
stored per (group, plural): the versions of a CRD share one store and are not converted
(an object read through another version only gets that ``apiVersion``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status" (others are listed but not served)
    verbs: tuple[str, ...] = ALL_VERBS
    categories: tuple[str, ...] = ()
    # Built-ins have typed strategies; a custom resource goes through admission and
    # bumps its generation on any non-metadata change.
    custom: bool = False
    crd_name: str = ""
    # A PUT of a missing object creates it (the strategy's AllowCreateOnUpdate): Leases,
    # Events and RBAC objects; ConfigMaps, Secrets and custom resources answer 404.
    create_on_update: bool = False

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """The storage key: every version of a resource shares one store."""
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _builtin(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    verbs: tuple[str, ...] = ALL_VERBS,
    create_on_update: bool = False,
) -> ResourceType:
    return ResourceType(
        group, version, plural, kind.lower(), kind, namespaced, short, sub, verbs, create_on_update=create_on_update
    )


BUILTINS: tuple[ResourceType, ...] = (
    _builtin(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short=("ns",),
        sub=("status",),
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    ),
    _builtin("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _builtin("", "v1", "secrets", "Secret"),
    _builtin("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",)),
    _builtin("", "v1", "services", "Service", short=("svc",), sub=("status",)),
    _builtin("", "v1", "events", "Event", short=("ev",), create_on_update=True),
    _builtin("", "v1", "pods", "Pod", short=("po",), sub=("status",)),
    _builtin("coordination.k8s.io", "v1", "leases", "Lease", create_on_update=True),
    _builtin("apps", "v1", "deployments", "Deployment", short=("deploy",), sub=("status",)),
    _builtin("rbac.authorization.k8s.io", "v1", "roles", "Role", create_on_update=True),
    _builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", create_on_update=True),
    _builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False, create_on_update=True),
    _builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False,
             create_on_update=True),
    _builtin("events.k8s.io", "v1", "events", "Event", short=("ev",), create_on_update=True),
    _builtin("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
             namespaced=False, sub=("status",)),
    _builtin("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
             "ValidatingAdmissionPolicyBinding", namespaced=False),
    _builtin("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",), sub=("status",)),
    _builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short=("crd", "crds"),
        sub=("status",),
    ),
)

CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACE_KEY = ("", "namespaces")


def from_crd(crd: JSON) -> list[ResourceType]:
    """The served versions of a CRD as resource types (what discovery shows once Established)."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    group = spec.get("group", "")
    types = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        subresources = tuple(sorted((version.get("subresources") or {}).keys()))
        types.append(
            ResourceType(
                group=group,
                version=version["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames", [])),
                subresources=subresources,
                categories=tuple(names.get("categories", [])),
                custom=True,
                crd_name=crd["metadata"]["name"],
            )
        )
    return types
