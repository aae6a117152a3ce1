"""The rendered chart applied to a fresh API emulator, as `helm install` would apply it:
every object is accepted, the CRDs become served (with admission), and the operator's
ServiceAccount may do what the operator does — and no more."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiClient, ApiException
from kubernetes.dynamic import DynamicClient

import kubecoord
from kubecoord_testkit import processes
from kubecoord_testkit.emulator import ApiEmulator
from tests.chart.conftest import Render
from tests.helpers import eventually

RELEASE_NAMESPACE = "kubecoord-system"
OURS = {"app.kubernetes.io/managed-by": "kubecoord"}
APP_NAMESPACE = "apps"
# Helm's install order for the kinds the chart renders.
INSTALL_ORDER = [
    "CustomResourceDefinition",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
    "PodDisruptionBudget",
    # Kinds Helm's install order does not list come last.
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[ApiEmulator]:
    """A cluster of its own: the chart owns cluster-scoped objects (CRDs, ClusterRoles)."""
    with ApiEmulator(host="127.0.0.1", port=0) as api:
        yield api


def client_for(api: ApiEmulator, path: pathlib.Path, token: str | None = None) -> ApiClient:
    api.write_kubeconfig(path, token=token)
    return kubernetes.config.new_client_from_config(config_file=str(path))


@pytest.fixture(scope="module")
def admin(cluster: ApiEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiClient]:
    client = client_for(cluster, tmp_path_factory.mktemp("admin") / "kubeconfig")
    yield client
    client.close()


@pytest.fixture(scope="module")
def installed(admin: ApiClient, render: Render) -> list[dict[str, Any]]:
    core = kubernetes.client.CoreV1Api(admin)
    for name in (RELEASE_NAMESPACE, APP_NAMESPACE):
        core.create_namespace({"metadata": {"name": name}})
    # The emulator implements no impersonation, which fenced writes are sent with: the
    # chart's fenced path runs on the real server (tests/operator/test_fenced_writes_real.py,
    # tests/real/test_install.py).
    objects = render("--set", "rbac.fenceOperatorWrites=false", namespace=RELEASE_NAMESPACE)
    install(admin, objects)
    return objects


@pytest.fixture(scope="module")
def operator_client(
    cluster: ApiEmulator, installed: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiClient]:
    """A client with the token of the chart's ServiceAccount, as the operator pods have."""
    (account,) = [o for o in installed if o["kind"] == "ServiceAccount"]
    token = cluster.token_for_service_account(RELEASE_NAMESPACE, account["metadata"]["name"])
    client = client_for(cluster, tmp_path_factory.mktemp("operator") / "kubeconfig", token)
    yield client
    client.close()


def test_every_rendered_object_is_stored(admin: ApiClient, installed: list[dict[str, Any]]) -> None:
    dynamic = DynamicClient(admin)
    for obj in installed:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        stored = resource.get(name=obj["metadata"]["name"], namespace=namespace).to_dict()
        assert stored["metadata"]["labels"] == obj["metadata"]["labels"]


def test_the_crds_are_served_with_admission(admin: ApiClient, installed: list[dict[str, Any]]) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    body = {
        "apiVersion": "kubecoord.dev/v1alpha1",
        "kind": "LeaderElection",
        "metadata": {"name": "billing"},
        "spec": {},
    }
    created = custom.create_namespaced_custom_object(
        "kubecoord.dev", "v1alpha1", APP_NAMESPACE, "leaderelections", body
    )
    assert created["spec"]["leaseDurationSeconds"] == 15
    bad = {**body, "metadata": {"name": "broken"}, "spec": {"leaseDurationSeconds": 5, "renewDeadlineSeconds": 8}}
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", APP_NAMESPACE, "leaderelections", bad)
    assert caught.value.status == 422
    for plural in ("groups", "kvstores"):
        assert custom.list_cluster_custom_object("kubecoord.dev", "v1alpha1", plural)["items"] == []


def test_the_operator_account_may_do_what_the_operator_does(operator_client: ApiClient, admin: ApiClient) -> None:
    name = f"le-{uuid.uuid4().hex[:6]}"
    kubernetes.client.CustomObjectsApi(admin).create_namespaced_custom_object(
        "kubecoord.dev",
        "v1alpha1",
        APP_NAMESPACE,
        "leaderelections",
        {"apiVersion": "kubecoord.dev/v1alpha1", "kind": "LeaderElection", "metadata": {"name": name}, "spec": {}},
    )
    custom = kubernetes.client.CustomObjectsApi(operator_client)
    core = kubernetes.client.CoreV1Api(operator_client)
    leases = kubernetes.client.CoordinationV1Api(operator_client)
    rbac = kubernetes.client.RbacAuthorizationV1Api(operator_client)
    extensions = kubernetes.client.ApiextensionsV1Api(operator_client)

    # kopf: discovery of its CRDs, cluster-wide list of its resources, finalizers and status
    assert len(extensions.list_custom_resource_definition().items) == 3
    custom.list_cluster_custom_object("kubecoord.dev", "v1alpha1", "leaderelections")
    custom.patch_namespaced_custom_object(
        "kubecoord.dev",
        "v1alpha1",
        APP_NAMESPACE,
        "leaderelections",
        name,
        {"metadata": {"finalizers": ["kubecoord.dev/cleanup"]}},
    )
    custom.patch_namespaced_custom_object_status(
        "kubecoord.dev", "v1alpha1", APP_NAMESPACE, "leaderelections", name, {"status": {"leader": "pod-a", "epoch": 1}}
    )
    # backing objects, events, and the Role/RoleBinding for spec.clients: kubecoord's, labelled
    # so (templates/operatorpolicy.yaml refuses the operator anything else)
    leases.create_namespaced_lease(APP_NAMESPACE, {"metadata": {"name": name, "labels": OURS},
                                                   "spec": {"holderIdentity": "pod-a"}})
    leases.delete_namespaced_lease(name, APP_NAMESPACE)
    core.create_namespaced_config_map(APP_NAMESPACE, {"metadata": {"name": f"kubecoord-kv.{name}", "labels": OURS},
                                                      "data": {}})
    core.create_namespaced_event(
        APP_NAMESPACE,
        {
            "metadata": {"name": f"{name}.1"},
            "involvedObject": {"kind": "LeaderElection", "name": name, "namespace": APP_NAMESPACE},
            "reason": "LeaderChanged",
            "message": "pod-a leads",
            "type": "Normal",
        },
    )
    role = {
        "metadata": {"name": f"kubecoord-leaderelection-{name}", "labels": OURS},
        "rules": [
            {
                "apiGroups": ["kubecoord.dev"],
                "resources": ["leaderelections"],
                "resourceNames": [name],
                "verbs": ["get"],
            },
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [name],
                "verbs": ["get", "list", "watch", "update", "patch"],
            },
        ],
    }
    rbac.create_namespaced_role(APP_NAMESPACE, role)
    rbac.create_namespaced_role_binding(
        APP_NAMESPACE,
        {
            "metadata": {"name": role["metadata"]["name"], "labels": OURS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]},
            "subjects": [{"kind": "ServiceAccount", "name": "billing", "namespace": APP_NAMESPACE}],
        },
    )
    # its own high availability: the election Lease in the release namespace
    leases.create_namespaced_lease(
        RELEASE_NAMESPACE, {"metadata": {"name": "kubecoord-operator", "labels": OURS},
                            "spec": {"holderIdentity": "kc-0"}}
    )
    leases.patch_namespaced_lease("kubecoord-operator", RELEASE_NAMESPACE, {"spec": {"holderIdentity": "kc-1"}})


@pytest.mark.parametrize(
    "forbidden",
    [
        "read secrets",
        "delete a namespace",
        "create a ClusterRole",
        "patch a Deployment",
        "create a Pod",
        "create CRDs",
    ],
)
def test_the_operator_account_may_do_nothing_else(operator_client: ApiClient, forbidden: str) -> None:
    core = kubernetes.client.CoreV1Api(operator_client)
    actions = {
        "read secrets": lambda: core.list_namespaced_secret(APP_NAMESPACE),
        "delete a namespace": lambda: core.delete_namespace(APP_NAMESPACE),
        "create a ClusterRole": lambda: kubernetes.client.RbacAuthorizationV1Api(operator_client).create_cluster_role(
            {"metadata": {"name": "everything"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
        ),
        "patch a Deployment": lambda: kubernetes.client.AppsV1Api(operator_client).patch_namespaced_deployment(
            "kc-kubecoord", RELEASE_NAMESPACE, {"spec": {"replicas": 5}}
        ),
        "create a Pod": lambda: core.create_namespaced_pod(
            APP_NAMESPACE, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        ),
        "create CRDs": lambda: kubernetes.client.ApiextensionsV1Api(operator_client).create_custom_resource_definition(
            {
                "metadata": {"name": "things.example.com"},
                "spec": {
                    "group": "example.com",
                    "scope": "Namespaced",
                    "names": {"plural": "things", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True}],
                },
            }
        ),
    }
    with pytest.raises(ApiException) as caught:
        actions[forbidden]()
    assert caught.value.status == 403, caught.value.body


@pytest.mark.parametrize("kind", ["Lease", "ConfigMap", "Role", "RoleBinding"])
def test_the_operator_account_may_not_write_what_is_not_kubecoords(
    operator_client: ApiClient, admin: ApiClient, kind: str
) -> None:
    """RBAC lets it (names derive from the resources'); the chart's policy refuses it: no
    create of an unlabelled object, no update or delete of a foreign one, no relabelling."""
    name = f"foreign-{uuid.uuid4().hex[:6]}"
    objects = {
        "Lease": ("coordination.k8s.io/v1", {"spec": {"holderIdentity": "someone"}}),
        "ConfigMap": ("v1", {"data": {"k": "v"}}),
        "Role": ("rbac.authorization.k8s.io/v1", {"rules": []}),
        "RoleBinding": ("rbac.authorization.k8s.io/v1", {"roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": []}),
    }
    api_version, fields = objects[kind]
    body = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **fields}
    as_admin = DynamicClient(admin).resources.get(api_version=api_version, kind=kind)
    as_operator = DynamicClient(operator_client).resources.get(api_version=api_version, kind=kind)
    for write in (lambda: as_operator.create(body=body, namespace=APP_NAMESPACE),
                  lambda: as_operator.create(body={**body, "metadata": {"name": f"{name}-2", "labels": {
                      "app.kubernetes.io/managed-by": "someone-else"}}}, namespace=APP_NAMESPACE)):
        with pytest.raises(ApiException) as refused:
            write()
        assert refused.value.status == 403 and "managed-by=kubecoord" in str(refused.value.body), refused.value.body
    as_admin.create(body=body, namespace=APP_NAMESPACE)  # somebody else's
    for write in (lambda: as_operator.patch(name=name, namespace=APP_NAMESPACE, body={"metadata": {"labels": OURS}},
                                            content_type="application/merge-patch+json"),
                  lambda: as_operator.delete(name=name, namespace=APP_NAMESPACE)):
        with pytest.raises(ApiException) as refused:
            write()
        assert refused.value.status == 403 and "managed-by=kubecoord" in str(refused.value.body), refused.value.body
    assert as_admin.get(name=name, namespace=APP_NAMESPACE).metadata.labels is None  # untouched
    as_admin.patch(name=name, namespace=APP_NAMESPACE, body={"metadata": {"labels": OURS}},
                   content_type="application/merge-patch+json")
    # Labelled as kubecoord's, it is the operator's to write, but not to give away.
    with pytest.raises(ApiException) as refused:
        as_operator.patch(name=name, namespace=APP_NAMESPACE, body={"metadata": {"labels": {
            "app.kubernetes.io/managed-by": None}}}, content_type="application/merge-patch+json")
    assert refused.value.status == 403
    as_operator.delete(name=name, namespace=APP_NAMESPACE)


def install(client: ApiClient, objects: list[dict[str, Any]]) -> None:
    for obj in sorted(objects, key=lambda o: INSTALL_ORDER.index(o["kind"])):
        resource = DynamicClient(client).resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        resource.create(body=obj, namespace=obj["metadata"].get("namespace") if resource.namespaced else None)


def test_a_namespaced_operator_is_confined_to_its_namespaces(render: Render, tmp_path: pathlib.Path) -> None:
    objects = render("--set", "operator.allNamespaces=false", "--set", "operator.namespaces={apps}")
    with ApiEmulator(host="127.0.0.1", port=0) as api:
        admin = client_for(api, tmp_path / "admin")
        for name in (RELEASE_NAMESPACE, "apps", "other"):
            kubernetes.client.CoreV1Api(admin).create_namespace({"metadata": {"name": name}})
        install(admin, objects)
        (account,) = [o for o in objects if o["kind"] == "ServiceAccount"]
        token = api.token_for_service_account(RELEASE_NAMESPACE, account["metadata"]["name"])
        operator = client_for(api, tmp_path / "operator", token)
        try:
            core = kubernetes.client.CoreV1Api(operator)
            leases = kubernetes.client.CoordinationV1Api(operator)
            assert {n.metadata.name for n in core.list_namespace().items} >= {"apps", "other"}
            leases.create_namespaced_lease("apps", {"metadata": {"name": "billing", "labels": OURS}, "spec": {}})
            kubernetes.client.CustomObjectsApi(operator).list_namespaced_custom_object(
                "kubecoord.dev", "v1alpha1", "apps", "groups"
            )
            # The operator's own election, through kubecoord as the operator runs it, in
            # the release namespace it does not watch: allowed by the leader-election Role.
            api.write_kubeconfig(tmp_path / "operator", token=token)
            with kubecoord.connect(f"kubernetes://{RELEASE_NAMESPACE}", kubeconfig=str(tmp_path / "operator")) as coord:
                election = coord.leader_election("kubecoord-operator")
                assert election.nominate("kc-kubecoord-0")
                leader = election.get_leader()
                assert leader is not None and leader.id == "kc-kubecoord-0"
            for action in (
                lambda: leases.create_namespaced_lease("other", {"metadata": {"name": "billing"}, "spec": {}}),
                lambda: kubernetes.client.CustomObjectsApi(operator).list_cluster_custom_object(
                    "kubecoord.dev", "v1alpha1", "groups"
                ),
                lambda: leases.patch_namespaced_lease("someone-else", RELEASE_NAMESPACE, {"spec": {}}),
            ):
                with pytest.raises(ApiException) as caught:
                    action()
                assert caught.value.status == 403
        finally:
            operator.close()
            admin.close()


def test_the_operator_reconciles_with_only_the_charts_permissions(
    cluster: ApiEmulator, installed: list[dict[str, Any]], admin: ApiClient, tmp_path: pathlib.Path
) -> None:
    """`kubecoord operator` as the Deployment runs it, with the ServiceAccount's token: it
    wins its election, reconciles a LeaderElection and grants its clients a Role — and
    the API server never answers it 403."""
    (account,) = [o for o in installed if o["kind"] == "ServiceAccount"]
    (deployment,) = [o for o in installed if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    kubeconfig = tmp_path / "operator"
    cluster.write_kubeconfig(
        kubeconfig, token=cluster.token_for_service_account(RELEASE_NAMESPACE, account["metadata"]["name"])
    )
    env = {
        **os.environ,
        "POD_NAME": "kc-kubecoord-0",
        "POD_NAMESPACE": RELEASE_NAMESPACE,
        **{e["name"]: e["value"] for e in container["env"] if "value" in e},
    }
    env["KUBECONFIG"] = str(kubeconfig)  # outside a cluster; kopf's login reads it at import
    command = [sys.executable, "-m", "kubecoord.cli", *container["command"][1:], *container["args"]]
    command += ["--health-port", "0", "--metrics-port", "0", "--bind", "127.0.0.1"]
    cluster.reset_requests()
    log = (tmp_path / "operator.log").open("w+")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    name = f"le-{uuid.uuid4().hex[:6]}"
    custom = kubernetes.client.CustomObjectsApi(admin)
    try:
        custom.create_namespaced_custom_object(
            "kubecoord.dev",
            "v1alpha1",
            APP_NAMESPACE,
            "leaderelections",
            {
                "apiVersion": "kubecoord.dev/v1alpha1",
                "kind": "LeaderElection",
                "metadata": {"name": name},
                "spec": {"clients": ["billing"]},
            },
        )

        def ready() -> bool:
            assert process.poll() is None, log.seek(0) or log.read()
            status = custom.get_namespaced_custom_object(
                "kubecoord.dev", "v1alpha1", APP_NAMESPACE, "leaderelections", name
            ).get("status", {})
            return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))

        eventually(ready, timeout=60)
        roles = kubernetes.client.RbacAuthorizationV1Api(admin).list_namespaced_role(APP_NAMESPACE).items
        assert any(name in role.metadata.name for role in roles)
        holder = kubernetes.client.CoordinationV1Api(admin).read_namespaced_lease(
            container_env(container, "KUBECOORD_OPERATOR_LEASE"), RELEASE_NAMESPACE
        )
        assert holder.spec.holder_identity == "kc-kubecoord-0"
    finally:
        processes.stop(process, 5)  # a graceful stop is the operator's own tests' business
        log.close()
    operator_requests = [r for r in cluster.requests if (r.user or "").startswith("system:serviceaccount:")]
    assert operator_requests
    assert [r for r in operator_requests if r.status == 403] == []


def container_env(container: dict[str, Any], name: str) -> str:
    (value,) = [e["value"] for e in container["env"] if e["name"] == name]
    return str(value)
