"""Authentication (bearer tokens) and authorization (RBAC over stored objects).

- The admin token may do everything (like the cluster-admin kubeconfig of kind).
- A ServiceAccount token authenticates as ``system:serviceaccount:NS:NAME`` in the groups
  ``system:serviceaccounts``, ``system:serviceaccounts:NS`` and ``system:authenticated``,
  and is authorized by the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings
  stored in the emulator, evaluated per request as the RBAC authorizer does: verbs,
  apiGroups, resources (``leases/status`` for subresources, ``*``, ``*/status``,
  ``leases/*``), resourceNames; subjects of kind ServiceAccount, User and Group.
- A request without a known token answers 401 (unless the emulator was started with
  ``anonymous_admin=True``: then a request without an Authorization header is admin, as
  on the old insecure port; ``kubecoord-testkit emulator`` does this for kubectl, which sends
  no bearer token over plain HTTP).
- Every authenticated identity may read the non-resource URLs (discovery, /version,
  health), as the default ``system:discovery`` role grants.

Not emulated: aggregated ClusterRoles (aggregationRule), TokenReview/SubjectAccessReview
APIs, impersonation, token expiry; a ServiceAccount token is valid whether or not the
ServiceAccount object exists.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from kubecoord_testkit.emulator.store import Store

JSON = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]
    admin: bool = False
    namespace: str = ""  # a ServiceAccount's namespace


@dataclass(frozen=True)
class Attributes:
    """What a resource request asks to do, as the authorizer sees it."""

    verb: str
    group: str
    resource: str
    subresource: str | None
    name: str | None
    namespace: str | None

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


class Tokens:
    def __init__(self, *, anonymous_admin: bool = False) -> None:
        # Like the old kube-apiserver's insecure port: requests with no Authorization header
        # act as admin. For kubectl, which never sends a bearer token over plain HTTP.
        self.anonymous_admin = anonymous_admin
        self.admin_token = secrets.token_urlsafe(24)
        self._identities: dict[str, Identity] = {
            self.admin_token: Identity("kubernetes-admin", ("system:masters", "system:authenticated"), admin=True)
        }

    def for_service_account(self, namespace: str, name: str) -> str:
        user = f"system:serviceaccount:{namespace}:{name}"
        for token, identity in self._identities.items():
            if identity.user == user:
                return token
        token = secrets.token_urlsafe(24)
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated")
        self._identities[token] = Identity(user, groups, namespace=namespace)
        return token

    def identify(self, authorization: str | None) -> Identity | None:
        if not authorization and self.anonymous_admin:
            return self._identities[self.admin_token]
        if not authorization or not authorization.startswith("Bearer "):
            return None
        return self._identities.get(authorization[len("Bearer ") :].strip())


def _subject_matches(subject: JSON, identity: Identity, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return identity.user == f"system:serviceaccount:{namespace}:{name}"
    if kind == "User":
        return identity.user == name
    if kind == "Group":
        return name in identity.groups
    return False


def _resource_matches(rules_resources: list[str], attrs: Attributes) -> bool:
    wanted = attrs.full_resource
    for resource in rules_resources:
        if resource in ("*", wanted):
            return True
        if attrs.subresource and resource == f"*/{attrs.subresource}":
            return True
        if attrs.subresource and resource == f"{attrs.resource}/*":
            return True
    return False


def rule_allows(rule: JSON, attrs: Attributes) -> bool:
    verbs, groups = rule.get("verbs") or [], rule.get("apiGroups") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if "*" not in groups and attrs.group not in groups:
        return False
    if not _resource_matches(rule.get("resources") or [], attrs):
        return False
    names = rule.get("resourceNames") or []
    return not names or (attrs.name is not None and attrs.name in names)


def authorize(store: Store, identity: Identity, attrs: Attributes) -> bool:
    if identity.admin:
        return True
    role_sets: list[list[JSON]] = []
    bindings = [(b, "") for b in store.select((RBAC, "clusterrolebindings"))[0]]
    if attrs.namespace:
        bindings += [(b, attrs.namespace) for b in store.select((RBAC, "rolebindings"), attrs.namespace)[0]]
    for binding, namespace in bindings:
        if not any(_subject_matches(s, identity, namespace) for s in binding.get("subjects") or []):
            continue
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            role = store.get((RBAC, "clusterroles"), "", ref.get("name", ""))
        elif ref.get("kind") == "Role" and namespace:
            role = store.get((RBAC, "roles"), namespace, ref.get("name", ""))
        else:
            role = None
        if role is not None:
            role_sets.append(role.get("rules") or [])
    return any(rule_allows(rule, attrs) for rules in role_sets for rule in rules)


def denial(identity: Identity, attrs: Attributes) -> str:
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (
        f'User "{identity.user}" cannot {attrs.verb} resource "{attrs.full_resource}" in API group '
        f'"{attrs.group}" {where}'
    )
