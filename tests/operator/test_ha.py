"""Operator high availability: two ``kubecoord operator`` processes, one kubecoord Lease.

Only the Lease holder reconciles; the standby answers /healthz as a standby; after the
holder is killed with -9 the standby takes over (within the lease duration) and
reconciles resources and status again. Runs in its own namespace so the package's
in-process operator does not interfere.
"""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import kubernetes.client
import pytest

import kubecoord
from kubecoord_testkit.servers.managed import free_port
from tests.helpers import eventually

TIMINGS = ["--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5"]


def _role(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return str(json.load(response)["role"])
    except OSError:
        return None


class Replica:
    def __init__(self, identity: str, namespace: str, lease: str, kubeconfig: pathlib.Path, log: pathlib.Path) -> None:
        self.identity = identity
        self.health_port = free_port()
        command = [
            sys.executable, "-m", "kubecoord.cli", "--log-level", "INFO", "--log-format", "text",
            "operator", "--namespace", namespace, "--kubeconfig", str(kubeconfig), "--identity", identity,
            "--lease-namespace", namespace, "--lease-name", lease, *TIMINGS,
            "--health-port", str(self.health_port), "--metrics-port", "0", "--bind", "127.0.0.1",
        ]  # fmt: skip
        self.log = log
        self.process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)

    @property
    def role(self) -> str | None:
        return _role(self.health_port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def namespace(k8s: kubernetes.client.ApiClient, unique: str) -> Iterator[str]:
    name = f"ha-{unique}"
    core = kubernetes.client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": name}})
    yield name


def test_standby_takes_over_when_the_active_operator_is_killed(
    k8s: kubernetes.client.ApiClient, kubeconfig_path: pathlib.Path, namespace: str, tmp_path: pathlib.Path
) -> None:
    custom = kubernetes.client.CustomObjectsApi(k8s)
    coordination = kubernetes.client.CoordinationV1Api(k8s)
    lease = "kubecoord-operator"

    def holder() -> str | None:
        try:
            return str(coordination.read_namespaced_lease(lease, namespace).spec.holder_identity or "") or None
        except kubernetes.client.exceptions.ApiException:
            return None

    def create(name: str) -> None:
        body = {
            "apiVersion": "kubecoord.dev/v1alpha1",
            "kind": "LeaderElection",
            "metadata": {"name": name},
            "spec": {},
        }
        custom.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", namespace, "leaderelections", body)

    def status(name: str) -> dict[str, object]:
        obj = custom.get_namespaced_custom_object("kubecoord.dev", "v1alpha1", namespace, "leaderelections", name)
        return dict(obj.get("status") or {})

    def ready(name: str) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in status(name).get("conditions") or [])  # type: ignore[attr-defined]

    first = Replica("op-a", namespace, lease, kubeconfig_path, tmp_path / "op-a.log")
    second: Replica | None = None
    try:
        eventually(lambda: holder() == "op-a", timeout=30)
        second = Replica("op-b", namespace, lease, kubeconfig_path, tmp_path / "op-b.log")
        eventually(lambda: first.role == "leader" and second is not None and second.role == "standby", timeout=30)

        create("before")
        eventually(lambda: ready("before"), timeout=30)
        assert holder() == "op-a"  # the standby did not take the Lease meanwhile

        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
        eventually(lambda: holder() == "op-b", timeout=30)
        eventually(lambda: second is not None and second.role == "leader", timeout=30)

        create("after")
        eventually(lambda: ready("after"), timeout=30)
        options = {
            "kubeconfig": str(kubeconfig_path),
            "lease_duration": 3.0,
            "renew_deadline": 2.0,
            "retry_period": 0.5,
        }
        with kubecoord.connect(f"kubernetes://{namespace}", **options) as client:
            client.leader_election("before").nominate("app-1")
            eventually(lambda: status("before").get("leader") == "app-1", timeout=30)

        second.process.send_signal(signal.SIGTERM)
        assert second.process.wait(timeout=30) == 0, second.log.read_text()[-3000:]
        eventually(lambda: holder() is None, timeout=10)  # a clean shutdown resigns the Lease
    finally:
        first.stop()
        if second is not None:
            second.stop()
