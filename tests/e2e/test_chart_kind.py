"""`helm install` of charts/kubecoord on a kind cluster: the operator rolls out with two
ready replicas, one holds the operator Lease, the CRDs are served, a LeaderElection gets
its status and an invalid one is refused by the real API server.

Needs Docker (a running engine), kind and the operator image (built here from the
Dockerfile when missing); skipped with the missing piece named otherwise. Uses kind's
CLI directly (no download: pytest-kind would fetch kind and kubectl from the internet).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kubecoord"
NAMESPACE = "kubecoord-system"

pytestmark = pytest.mark.e2e


def _missing() -> str | None:
    for tool in ("docker", "kind", "kubectl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return "no Docker engine is running (docker info failed)"
    return None


def _run(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=check)


@pytest.fixture(scope="module")
def image() -> str:
    reason = _missing()
    if reason:
        pytest.skip(f"kind e2e needs Docker and kind: {reason}")
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    tag = f"kubecoord/operator:{app_version}"
    if _run("docker", "image", "inspect", tag, check=False).returncode != 0:
        if not (ROOT / "Dockerfile").exists():
            pytest.skip(f"the image {tag} is not built and there is no Dockerfile to build it")
        _run("docker", "build", "-t", tag, str(ROOT), timeout=1800)
    return tag


@pytest.fixture(scope="module")
def kubeconfig(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    name = f"kubecoord-e2e-{uuid.uuid4().hex[:6]}"
    path = tmp_path_factory.mktemp("kind") / "kubeconfig"
    _run("kind", "create", "cluster", "--name", name, "--kubeconfig", str(path), "--wait", "180s")
    try:
        _run("kind", "load", "docker-image", image, "--name", name)
        yield path
    finally:
        _run("kind", "delete", "cluster", "--name", name, check=False)


def kubectl(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run("kubectl", "--kubeconfig", str(kubeconfig), *args, timeout=300, check=check)


@pytest.fixture(scope="module")
def installed(kubeconfig: Path) -> Path:
    helm = Path(sys.executable).parent / "helm"
    if not helm.exists():
        _run(sys.executable, str(ROOT / "charts/scripts/install_helm.py"), str(helm))
    _run(
        str(helm), "install", "kubecoord", str(CHART), "--kubeconfig", str(kubeconfig),
        "--namespace", NAMESPACE, "--create-namespace", "--wait", "--timeout", "5m",
    )  # fmt: skip
    return kubeconfig


def eventually(check: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {check.__name__}"
        time.sleep(1)


def jsonpath(kubeconfig: Path, *what: str, path: str) -> str:
    return kubectl(kubeconfig, "get", *what, "-o", f"jsonpath={path}", check=False).stdout


def test_operator_rolls_out_with_one_leader(installed: Path) -> None:
    deployment = json.loads(kubectl(installed, "-n", NAMESPACE, "get", "deployment", "kubecoord", "-o", "json").stdout)
    assert deployment["status"]["readyReplicas"] == 2

    def one_pod_leads() -> bool:
        holder = jsonpath(installed, "-n", NAMESPACE, "lease", "kubecoord-operator", path="{.spec.holderIdentity}")
        return holder.startswith("kubecoord-")

    eventually(one_pod_leads)


def test_a_leader_election_is_reconciled_and_an_invalid_one_refused(installed: Path) -> None:
    kubectl(installed, "apply", "-f", str(ROOT / "examples/leaderelection.yaml"))

    def ready() -> bool:
        return "True" in jsonpath(
            installed, "leaderelection", "billing", path='{.status.conditions[?(@.type=="Ready")].status}'
        )

    eventually(ready)
    refused = kubectl(installed, "apply", "-f", str(ROOT / "examples/invalid/leaderelection.yaml"), check=False)
    assert refused.returncode != 0
    assert "spec.renewDeadlineSeconds" in refused.stderr
