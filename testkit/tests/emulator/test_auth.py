"""Bearer tokens and RBAC: 401 without a known token, 403 with the API server's message,
Roles and ClusterRoles bound to ServiceAccounts and groups."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kubecoord_testkit.emulator import ApiEmulator

from .helpers import lease, request, status_of

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def rbac(api_client: kubernetes.client.ApiClient) -> kubernetes.client.RbacAuthorizationV1Api:
    return kubernetes.client.RbacAuthorizationV1Api(api_client)


@pytest.fixture
def as_account(api_emulator: ApiEmulator, tmp_path: pathlib.Path) -> Callable[[str, str], kubernetes.client.ApiClient]:
    clients: list[kubernetes.client.ApiClient] = []

    def make(namespace: str, name: str) -> kubernetes.client.ApiClient:
        token = api_emulator.token_for_service_account(namespace, name)
        path = api_emulator.write_kubeconfig(tmp_path / f"{namespace}-{name}", namespace=namespace, token=token)
        client = kubernetes.config.new_client_from_config(config_file=str(path))
        clients.append(client)
        return client

    yield make  # type: ignore[misc]
    for client in clients:
        client.close()


def _grant(
    rbac: kubernetes.client.RbacAuthorizationV1Api,
    namespace: str,
    name: str,
    rules: list[dict[str, Any]],
    subjects: list[dict[str, Any]],
) -> None:
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": name},
            "subjects": subjects,
        },
    )


def test_requests_without_a_known_token_answer_401(api_emulator: ApiEmulator) -> None:
    for token in ("", "made-up"):
        code, body = request(api_emulator, "GET", "/api/v1/namespaces", token=token)
        assert code == 401
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "details": {},
            "code": 401,
        }
    assert request(api_emulator, "GET", "/healthz", token="")[0] == 200


def test_service_account_without_bindings_is_forbidden_with_the_api_server_message(
    as_account: Callable[[str, str], kubernetes.client.ApiClient],
    leases: kubernetes.client.CoordinationV1Api,
    namespace: str,
) -> None:
    leases.create_namespaced_lease(namespace, lease("x"))
    client = kubernetes.client.CoordinationV1Api(as_account(namespace, "app"))
    with pytest.raises(ApiException) as caught:
        client.replace_namespaced_lease("x", namespace, lease("x"))
    assert caught.value.status == 403
    body = status_of(caught.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        f'leases.coordination.k8s.io "x" is forbidden: User "system:serviceaccount:{namespace}:app" cannot update '
        f'resource "leases" in API group "coordination.k8s.io" in the namespace "{namespace}"'
    )
    assert body["details"] == {"name": "x", "group": "coordination.k8s.io", "kind": "leases"}
    with pytest.raises(ApiException) as caught:
        client.list_namespaced_lease(namespace)
    assert status_of(caught.value)["message"].startswith("leases.coordination.k8s.io is forbidden: ")
    with pytest.raises(ApiException) as caught:
        kubernetes.client.CoreV1Api(as_account(namespace, "app")).list_namespace()
    assert status_of(caught.value)["message"].endswith(
        'cannot list resource "namespaces" in API group "" at the cluster scope'
    )


def test_role_binding_grants_exactly_its_rules(
    as_account: Callable[[str, str], kubernetes.client.ApiClient],
    rbac: kubernetes.client.RbacAuthorizationV1Api,
    leases: kubernetes.client.CoordinationV1Api,
    core: kubernetes.client.CoreV1Api,
    namespace: str,
) -> None:
    _grant(
        rbac,
        namespace,
        "lease-user",
        [
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "verbs": ["get", "list", "watch", "create"],
            },
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": ["mine"],
                "verbs": ["update", "patch", "delete"],
            },
        ],
        [{"kind": "ServiceAccount", "name": "app", "namespace": namespace}],
    )
    client = kubernetes.client.CoordinationV1Api(as_account(namespace, "app"))
    client.create_namespaced_lease(namespace, lease("mine"))
    client.create_namespaced_lease(namespace, lease("theirs"))
    assert len(client.list_namespaced_lease(namespace).items) == 2
    client.patch_namespaced_lease("mine", namespace, {"spec": {"holderIdentity": "b"}})
    with pytest.raises(ApiException) as caught:
        client.patch_namespaced_lease("theirs", namespace, {"spec": {"holderIdentity": "b"}})
    assert caught.value.status == 403
    with pytest.raises(ApiException) as caught:  # other resources stay forbidden
        kubernetes.client.CoreV1Api(as_account(namespace, "app")).list_namespaced_config_map(namespace)
    assert caught.value.status == 403
    other = f"{namespace}-b"
    core.create_namespace({"metadata": {"name": other}})
    with pytest.raises(ApiException) as caught:  # a Role binds in its own namespace only
        client.list_namespaced_lease(other)
    assert caught.value.status == 403
    client.delete_namespaced_lease("mine", namespace)


def test_cluster_role_binding_group_subjects_wildcards_and_subresources(
    as_account: Callable[[str, str], kubernetes.client.ApiClient],
    rbac: kubernetes.client.RbacAuthorizationV1Api,
    leases: kubernetes.client.CoordinationV1Api,
    namespace: str,
) -> None:
    name = f"{namespace}-reader"
    rbac.create_cluster_role(
        {
            "metadata": {"name": name},
            "rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]},
                {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]},
            ],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "Group", "name": f"system:serviceaccounts:{namespace}", "apiGroup": RBAC}],
        }
    )
    leases.create_namespaced_lease(namespace, lease("x"))
    reader = as_account(namespace, "anyone")
    assert kubernetes.client.CoordinationV1Api(reader).read_namespaced_lease("x", namespace).metadata.name == "x"
    assert kubernetes.client.CoreV1Api(reader).list_namespace().items
    with pytest.raises(ApiException) as caught:
        kubernetes.client.CoordinationV1Api(reader).delete_namespaced_lease("x", namespace)
    assert caught.value.status == 403
    apps = kubernetes.client.AppsV1Api(reader)
    deployment = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    kubernetes.client.AppsV1Api(leases.api_client).create_namespaced_deployment(namespace, deployment)
    apps.patch_namespaced_deployment_status("d", namespace, {"status": {"replicas": 1}})
    with pytest.raises(ApiException) as caught:
        apps.patch_namespaced_deployment("d", namespace, {"spec": {"replicas": 2}})
    assert 'cannot patch resource "deployments"' in status_of(caught.value)["message"]
    with pytest.raises(ApiException) as caught:
        kubernetes.client.CoordinationV1Api(as_account(f"{namespace}-b", "x")).read_namespaced_lease("x", namespace)
    assert caught.value.status == 403


def test_role_binding_to_a_cluster_role_is_limited_to_its_namespace(
    as_account: Callable[[str, str], kubernetes.client.ApiClient],
    rbac: kubernetes.client.RbacAuthorizationV1Api,
    namespace: str,
) -> None:
    name = f"{namespace}-cm"
    rbac.create_cluster_role(
        {"metadata": {"name": name}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "cm"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "app"}],  # namespace defaults to the binding's
        },
    )
    core = kubernetes.client.CoreV1Api(as_account(namespace, "app"))
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as caught:
        core.list_config_map_for_all_namespaces()
    assert caught.value.status == 403


def test_admin_token_may_do_everything_and_requests_record_the_user(
    api_emulator: ApiEmulator, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    api_emulator.reset_requests()
    core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}, "stringData": {"a": "b"}})
    assert [r.user for r in api_emulator.requests if r.namespace == namespace] == ["kubernetes-admin"]
