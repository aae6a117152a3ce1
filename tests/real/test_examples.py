"""Examples that cannot trap: on a whole cluster (controllers, scheduler, a hollow node),
every example applies in the order examples/README.md gives, with a plain
``kubectl apply -f FILE`` (namespaces created by the examples themselves, names
consistent), the invalid one is refused with its message, every ``kubectl`` command written
in the examples' comments works, and the leader app run against only the top-level examples
says that its KVStore is missing instead of retrying with a wrong hint.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubecoord_testkit import processes
from kubecoord_testkit.servers.managed import free_port
from tests.fixtures.whole_cluster import WholeCluster
from tests.helpers import eventually

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ORDER = [
    "serviceaccounts.yaml",
    "leaderelection.yaml",
    "group.yaml",
    "kvstore.yaml",
    "zookeeper/leaderelection.yaml",
    "leader-app/deployment.yaml",
    "partitions/deployment.yaml",
]
COMMENTED_KUBECTL = re.compile(r"^#\s+(kubectl\s.*?)(?:\s{2,}#.*)?$")


def _kubectl(kubectl: pathlib.Path, cluster: WholeCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kubectl), "--kubeconfig", str(cluster.kubeconfig), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, check=False)


def _documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((EXAMPLES / name).read_text()) if doc]


def test_the_order_covers_every_example_and_the_readme_lists_it() -> None:
    found = {str(path.relative_to(EXAMPLES)) for path in EXAMPLES.rglob("*.yaml")} - {"invalid/leaderelection.yaml"}
    assert set(ORDER) == found
    readme = (EXAMPLES / "README.md").read_text()
    positions = [readme.index(f"`{name}`") for name in ORDER]
    assert positions == sorted(positions), "examples/README.md lists them in another order"


def test_names_are_consistent() -> None:
    """Every spec.clients and serviceAccountName is a ServiceAccount the examples create in
    the namespace where it is used; the leader app's Deployment names resources of its own."""
    accounts: set[tuple[str, str]] = set()
    used: list[tuple[str, str, str]] = []
    resources: set[tuple[str, str, str]] = set()
    for name in ORDER:
        for doc in _documents(name):
            namespace = doc["metadata"].get("namespace", "default")
            if doc["kind"] == "ServiceAccount":
                accounts.add((namespace, doc["metadata"]["name"]))
            for client in (doc.get("spec") or {}).get("clients", []):
                used.append((name, namespace, client))
            if doc["kind"] in ("LeaderElection", "Group", "KVStore"):
                resources.add((namespace, doc["kind"], doc["metadata"]["name"]))
            if doc["kind"] == "Deployment":
                pod = doc["spec"]["template"]["spec"]
                used.append((name, namespace, pod["serviceAccountName"]))
                env = {e["name"]: e.get("value") for e in pod["containers"][0].get("env", [])}
                if "APP_ELECTION" in env:
                    election = env["APP_ELECTION"]
                    assert (namespace, "LeaderElection", election) in resources, (name, election)
                    assert (namespace, "KVStore", env.get("APP_STORE", election)) in resources, name
    missing = [(name, namespace, account) for name, namespace, account in used if (namespace, account) not in accounts]
    assert not missing, missing


def test_the_leader_app_example_carries_app_py() -> None:
    (configmap,) = [d for d in _documents("leader-app/deployment.yaml") if d["kind"] == "ConfigMap"]
    assert configmap["data"]["app.py"] == (EXAMPLES / "leader-app" / "app.py").read_text()


@pytest.fixture(scope="module")
def applied(whole_cluster: WholeCluster, kubectl: pathlib.Path) -> WholeCluster:
    crds = _kubectl(kubectl, whole_cluster, "apply", "--server-side", "-f", "crds/")
    assert crds.returncode == 0, crds.stderr
    established = _kubectl(kubectl, whole_cluster, "wait", "--for=condition=Established", "--timeout=60s",
                           "-f", "crds/")
    assert established.returncode == 0, established.stderr
    for name in ORDER:
        result = _kubectl(kubectl, whole_cluster, "apply", "-f", f"examples/{name}")
        assert result.returncode == 0, f"kubectl apply -f examples/{name}: {result.stderr}"
    return whole_cluster


@pytest.fixture(scope="module")
def operator(applied: WholeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    """The operator as a host process (no container runs here) with the admin kubeconfig."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kubecoord.cli", "--log-level", "INFO", "operator", "--all-namespaces",
             "--kubeconfig", str(applied.kubeconfig), "--lease-namespace", "default", "--identity", "operator-0",
             "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1",
             "--health-port", str(free_port()), "--metrics-port", "0", "--bind", "127.0.0.1"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        yield log
    finally:
        processes.stop(process, 30)


def test_the_invalid_example_is_refused_with_its_message(applied: WholeCluster, kubectl: pathlib.Path) -> None:
    result = _kubectl(kubectl, applied, "apply", "-f", "examples/invalid/leaderelection.yaml")
    assert result.returncode != 0
    assert "renewDeadlineSeconds must be less than leaseDurationSeconds" in result.stderr


def test_the_examples_namespace_and_deployments_exist(applied: WholeCluster, kubectl: pathlib.Path) -> None:
    for namespace, deployment in (("billing", "billing"), ("default", "partition-worker")):
        result = _kubectl(kubectl, applied, "rollout", "status", f"deployment/{deployment}", "-n", namespace,
                          "--timeout=90s")
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_kubectl_command_in_the_comments_works(applied: WholeCluster, kubectl: pathlib.Path) -> None:
    commands = []
    for name in ORDER:
        for line in (EXAMPLES / name).read_text().splitlines():
            match = COMMENTED_KUBECTL.match(line)
            if match:
                commands.append((name, match[1]))
    assert len(commands) >= 4, commands
    for name, command in commands:
        result = _kubectl(kubectl, applied, *shlex.split(command)[1:])
        assert result.returncode == 0, f"{name}: {command}: {result.stderr}"


def test_ready_is_a_default_column(operator: pathlib.Path, applied: WholeCluster, kubectl: pathlib.Path) -> None:
    def ready() -> bool:
        result = _kubectl(kubectl, applied, "get", "le", "billing", "-n", "billing")
        lines = result.stdout.splitlines()
        return len(lines) == 2 and lines[0].split()[:4] == ["NAME", "LEADER", "EPOCH", "READY"] and "True" in lines[1]

    eventually(ready, timeout=90, interval=0.5)


def test_the_leader_app_against_the_top_level_examples_names_the_missing_store(
    operator: pathlib.Path, applied: WholeCluster, kubectl: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    # The top-level examples: LeaderElection billing (clients [billing]) exists in default,
    # KVStore billing does not. The app runs as ServiceAccount billing, as its pod would.
    eventually(lambda: _kubectl(kubectl, applied, "get", "rolebinding", "-n", "default",
                                "kubecoord-leaderelection-billing").returncode == 0, timeout=90, interval=0.5)
    token = _kubectl(kubectl, applied, "create", "token", "billing", "-n", "default")
    assert token.returncode == 0, token.stderr
    admin = yaml.safe_load(applied.kubeconfig.read_text())
    kubeconfig = tmp_path / "billing.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": "billing", "user": {"token": token.stdout.strip()}}],
        "contexts": [{"name": "billing", "context": {"cluster": admin["clusters"][0]["name"], "user": "billing",
                                                      "namespace": "default"}}],
        "current-context": "billing",
    }))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAME": "billing-pod-0", "APP_ELECTION": "billing",
           "KUBECOORD_URL": "kubernetes://default"}
    app = subprocess.Popen([sys.executable, str(EXAMPLES / "leader-app" / "app.py")], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=env, text=True)
    lines: list[dict[str, Any]] = []

    def read() -> None:
        assert app.stdout is not None
        for raw in app.stdout:
            lines.append(json.loads(raw))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        eventually(lambda: any(line["event"] == "waiting_for_permission" for line in lines), timeout=30)
        (waiting, *_) = [line for line in lines if line["event"] == "waiting_for_permission"]
        assert waiting["action"] == "bind KVStore billing", waiting
        assert "KVStore 'billing' does not exist in namespace 'default'" in waiting["error"], waiting
        assert "spec.clients" in waiting["hint"]
        time.sleep(0.5)
        assert app.poll() is None  # it waits (and retries), it does not crash
    finally:
        processes.stop(app, 10)
        reader.join(5)
