"""One face for the two API servers the Kubernetes tests run on: the emulator (in this
process) and the real kube-apiserver (kubecoord_testkit.servers.kubernetes).

A test written against a Cluster runs on both; a disagreement is an emulator bug. What
differs is hidden here: how a ServiceAccount gets a token (the emulator mints its own; the
real server answers TokenRequest) and how a test sees who wrote what (the emulator's
request record; the real server's audit log).
"""

from __future__ import annotations

import abc
import pathlib
import uuid
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubecoord_testkit.emulator import ApiEmulator
from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.fixtures.real_kubernetes import mint_token

WRITES = ("create", "update", "patch", "delete", "deletecollection")


class Cluster(abc.ABC):
    kind: str
    admin_user: str
    namespace: str
    admin_kubeconfig: pathlib.Path
    admin_api: k8s.ApiClient

    @property
    def url(self) -> str:
        return f"kubernetes://{self.namespace}"

    @abc.abstractmethod
    def service_account_kubeconfig(self, service_account: str, directory: pathlib.Path) -> pathlib.Path:
        """A bearer-token kubeconfig acting as ServiceAccount NAMESPACE/``service_account``."""

    @abc.abstractmethod
    def mark(self) -> int:
        """A point in the record of writes; ``writes(since=mark)`` sees what came after."""

    @abc.abstractmethod
    def writes(self, user: str, since: int) -> list[tuple[str, str | None, str | None, int | None]]:
        """(verb, resource, name, HTTP code) of every write by ``user`` after ``since``."""

    def service_account_user(self, service_account: str) -> str:
        return f"system:serviceaccount:{self.namespace}:{service_account}"

    def lease(self, name: str) -> dict[str, Any] | None:
        try:
            lease = k8s.CoordinationV1Api(self.admin_api).read_namespaced_lease(name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(self.admin_api.sanitize_for_serialization(lease))

    def holder(self, service: str) -> tuple[str, int] | None:
        """(holderIdentity, leaseTransitions) of the election Lease, or None if absent."""
        lease = self.lease(service)
        if lease is None:
            return None
        spec = lease.get("spec") or {}
        return spec.get("holderIdentity") or "", int(spec.get("leaseTransitions") or 0)

    def grant_namespace_clients(self) -> str:
        """Let every ServiceAccount of the namespace use Leases and ConfigMaps; returns the Role's name."""
        rbac = k8s.RbacAuthorizationV1Api(self.admin_api)
        role = f"kubecoord-client-{uuid.uuid4().hex[:6]}"
        rbac.create_namespaced_role(self.namespace, {"metadata": {"name": role}, "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
            {"apiGroups": ["kubecoord.dev"], "resources": ["*"], "verbs": ["get"]},
        ]})
        rbac.create_namespaced_role_binding(self.namespace, {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "Group", "name": f"system:serviceaccounts:{self.namespace}",
                          "apiGroup": "rbac.authorization.k8s.io"}],
        })
        return role

    def revoke(self, role: str) -> None:
        rbac = k8s.RbacAuthorizationV1Api(self.admin_api)
        rbac.delete_namespaced_role_binding(role, self.namespace)
        rbac.delete_namespaced_role(role, self.namespace)


class EmulatorCluster(Cluster):
    kind = "emulator"
    admin_user = "kubernetes-admin"

    def __init__(self, api: ApiEmulator, admin_kubeconfig: pathlib.Path, admin_api: k8s.ApiClient,
                 namespace: str = "default") -> None:
        self.api, self.admin_kubeconfig, self.admin_api, self.namespace = api, admin_kubeconfig, admin_api, namespace

    def service_account_kubeconfig(self, service_account: str, directory: pathlib.Path) -> pathlib.Path:
        token = self.api.token_for_service_account(self.namespace, service_account)
        return self.api.write_kubeconfig(directory / f"kubeconfig-{service_account}", token=token,
                                         namespace=self.namespace)

    def mark(self) -> int:
        return len(self.api.requests)

    def writes(self, user: str, since: int) -> list[tuple[str, str | None, str | None, int | None]]:
        return [(r.verb, r.resource, r.name, r.status) for r in self.api.requests[since:]
                if r.user == user and r.verb in WRITES]


class RealCluster(Cluster):
    kind = "real"
    admin_user = "admin"

    def __init__(self, server: RealApiServer, admin_api: k8s.ApiClient, namespace: str) -> None:
        self.server, self.admin_api, self.namespace = server, admin_api, namespace
        self.admin_kubeconfig = server.admin_kubeconfig

    def service_account_kubeconfig(self, service_account: str, directory: pathlib.Path) -> pathlib.Path:
        token = mint_token(self.admin_api, self.namespace, service_account)
        return self.server.token_kubeconfig(directory / f"kubeconfig-{service_account}", token, self.namespace)

    def mark(self) -> int:
        return self.server.audit_mark()

    def writes(self, user: str, since: int) -> list[tuple[str, str | None, str | None, int | None]]:
        return [(str(w["verb"]), w["resource"], w["name"], w["code"])  # type: ignore[misc]
                for w in self.server.writes(user=user, since=since)]
