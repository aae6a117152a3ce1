"""The command line driven as a user drives it: a subprocess per command.

State is arranged and checked through the library (kubecoord.connect) on the session's
API emulator and ZooKeeper server; each test has its own namespace or chroot.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

import kubecoord
from kubecoord import Coordinator
from kubecoord_testkit.emulator import ApiEmulator
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

# connect() takes **options: Any
FAST: dict[str, Any] = {"lease_duration": 3.0, "renew_deadline": 2.5, "retry_period": 0.5}


class Cli:
    """Runs ``python -m kubecoord.cli ARGS`` (``.testkit(ARGS)``: the kubecoord-testkit
    command) with a connection URL preset in the environment."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *args: str, stdin: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return self._run("kubecoord.cli", args, stdin, timeout)

    def testkit(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return self._run("kubecoord_testkit", args, None, timeout)

    def _run(
        self, module: str, args: tuple[str, ...], stdin: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", module, *args],
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def json(self, *args: str) -> Any:
        result = self(*args, "-o", "json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBECOORD_") and k != "KUBECONFIG"}
    env["HOME"] = env.get("HOME", "/tmp")
    return env


@pytest.fixture
def namespace(kubeconfig_path: pathlib.Path) -> str:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]  # kubernetes.config is unannotated
        config_file=str(kubeconfig_path), client_configuration=configuration
    )
    with k8s.ApiClient(configuration) as api:
        k8s.CoreV1Api(api).create_namespace(
            {"metadata": {"name": name}}  # type: ignore[arg-type]  # the client serializes a dict body as it is
        )
    return name


@pytest.fixture
def k8s_cli(kubeconfig_path: pathlib.Path, namespace: str) -> Cli:
    env = base_env()
    env["KUBECOORD_URL"] = f"kubernetes://{namespace}"
    env["KUBECONFIG"] = str(kubeconfig_path)
    return Cli(env)


@pytest.fixture
def k8s_connect(kubeconfig_path: pathlib.Path, namespace: str) -> Iterator[Callable[[], Coordinator]]:
    opened: list[Coordinator] = []

    def make() -> Coordinator:
        coordinator = kubecoord.connect(f"kubernetes://{namespace}", kubeconfig=str(kubeconfig_path), **FAST)
        opened.append(coordinator)
        return coordinator

    yield make
    for coordinator in opened:
        coordinator.close()


@pytest.fixture
def zk_url(zookeeper_server: ZooKeeperServer) -> str:
    return f"zookeeper://{zookeeper_server.hosts}/cli-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zk_cli(zk_url: str) -> Cli:
    env = base_env()
    env["KUBECOORD_URL"] = zk_url
    return Cli(env)


ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cli, pathlib.Path]]:
    """An emulator of its own with the CRDs installed and namespace ``apps`` holding
    LeaderElection ``billing``, Group ``workers`` and KVStore ``topics``."""
    with ApiEmulator(host="127.0.0.1", port=0) as api:
        path = api.write_kubeconfig(tmp_path_factory.mktemp("declared") / "kubeconfig")
        client = kubernetes.config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]  # kubernetes.config is unannotated
        extensions = kubernetes.client.ApiextensionsV1Api(client)
        for crd in sorted((ROOT / "crds").glob("*.yaml")):
            extensions.create_custom_resource_definition(yaml.safe_load(crd.read_text()))
        kubernetes.client.CoreV1Api(client).create_namespace(
            {"metadata": {"name": "apps"}}  # type: ignore[arg-type]  # the client serializes a dict body as it is
        )
        custom = kubernetes.client.CustomObjectsApi(client)
        for plural, kind, name in (("leaderelections", "LeaderElection", "billing"), ("groups", "Group", "workers"),
                                   ("kvstores", "KVStore", "topics")):
            custom.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", "apps", plural, {
                "apiVersion": "kubecoord.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": {}})
        client.close()
        env = base_env()
        env["KUBECONFIG"] = str(path)
        env["KUBECOORD_URL"] = "kubernetes://apps"
        yield Cli(env), path


@pytest.fixture
def plain_cli() -> Cli:
    return Cli(base_env())
