"""Fixtures for the Kubernetes backend's own tests (on the session's API emulator)."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

import kubecoord
from kubecoord import Coordinator
from kubecoord_testkit.emulator import ApiEmulator

from .clusters import Cluster, EmulatorCluster, RealCluster

FAST = {"lease_duration": 3.0, "renew_deadline": 2.5, "retry_period": 0.5}
"""Expiry in seconds, with a renew deadline that survives a loaded machine (five tries)."""

Connect = Callable[..., Coordinator]


@pytest.fixture
def name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def connect(kubeconfig_path: pathlib.Path) -> Iterator[Connect]:
    """connect(**options) -> a coordinator on the emulator with FAST timings; closed after the test."""
    opened: list[Coordinator] = []

    def make(url: str = "kubernetes://default", **options: Any) -> Coordinator:
        options.setdefault("kubeconfig", str(kubeconfig_path))
        for key, value in FAST.items():
            options.setdefault(key, value)
        coordinator = kubecoord.connect(url, **options)
        opened.append(coordinator)
        return coordinator

    yield make
    for coordinator in opened:
        coordinator.close()


@pytest.fixture(scope="session")
def admin_api(kubeconfig_path: pathlib.Path) -> k8s.ApiClient:
    """The official client as cluster admin, to arrange what the tests need (RBAC, foreign Leases)."""
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=configuration)
    return k8s.ApiClient(configuration)


def grant(admin_api: k8s.ApiClient, service_account: str, rules: list[dict[str, Any]]) -> None:
    """Bind a new Role with ``rules`` in "default" to the ServiceAccount default/``service_account``."""
    rbac = k8s.RbacAuthorizationV1Api(admin_api)
    # Binding reads the kubecoord resource of a handle's name; a 403 there is an error (not
    # a fallback), so a client needs it whenever the CRDs are installed (as tests/operator does).
    rules = [*rules, {"apiGroups": ["kubecoord.dev"], "resources": ["*"], "verbs": ["get"]}]
    rbac.create_namespaced_role("default", {"metadata": {"name": service_account}, "rules": rules})
    rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": service_account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": service_account},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": "default"}],
        },
    )


def kubeconfig_for(api: ApiEmulator, directory: pathlib.Path, token: str) -> str:
    return str(api.write_kubeconfig(directory / f"kubeconfig-{uuid.uuid4().hex[:6]}", token=token))


@pytest.fixture(scope="module", params=["emulator", "real"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The API server a two-server test runs on: the emulator, then the real kube-apiserver
    (a namespace of the module's own there; skipped with the reason without its binaries)."""
    if request.param == "emulator":
        return EmulatorCluster(
            request.getfixturevalue("api_emulator"),
            request.getfixturevalue("kubeconfig_path"),
            request.getfixturevalue("admin_api"),
        )
    return RealCluster(
        request.getfixturevalue("real_api"),
        request.getfixturevalue("real_admin_api"),
        request.getfixturevalue("real_namespace"),
    )
