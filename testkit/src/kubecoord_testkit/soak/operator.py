"""The kubecoord operator in a Kubernetes soak, as in a real deployment.

The soak's election, group and store are kubecoord.dev resources (CRDs installed from
crds/ of this checkout) whose spec carries the soak's timings, and ``kubecoord operator``
runs as a process of its own: it creates the election's Lease and the store's ConfigMap,
and its drift repair re-creates them when a fault deletes them — the recovery path a
deployment relies on (clients bound to a LeaderElection never create its Lease: only the
operator knows the epoch to re-create it at). The operator reaches the server through the
soak's control proxy (never faulted), so its restarts are the server's only. Its event log
(``--history``) goes with the clients' logs: the expiries it reaps are part of the history
(a member killed with -9 logs nothing more, and the operator may be the one to reap it).

The one other soak module that imports the kubernetes client (import-linter allows it).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubecoord_testkit import processes
from kubecoord_testkit.checkout import project_root
from kubecoord_testkit.servers.managed import free_port

GROUP, VERSION = "kubecoord.dev", "v1alpha1"
READY_TIMEOUT = 120.0


def _crds_dir() -> Path:
    return project_root() / "crds"


class SoakOperator:
    """CRDs, the three resources, and one ``kubecoord operator`` process; stop() reaps it."""

    def __init__(self, kubeconfig: Path, namespace: str, workdir: Path, history: Path | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.workdir = workdir
        self.history = history
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=configuration
        )
        self._api = k8s.ApiClient(configuration)
        self._custom = k8s.CustomObjectsApi(self._api)
        self.process: subprocess.Popen[bytes] | None = None

    def install(self, *, election: str, group: str, store: str, timings: dict[str, Any]) -> None:
        """CRDs, then a LeaderElection, a Group and a KVStore with the soak's timings."""
        extensions = k8s.ApiextensionsV1Api(self._api)
        names = []
        for path in sorted(_crds_dir().glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            names.append(crd["metadata"]["name"])
            try:
                extensions.create_custom_resource_definition(crd)
            except k8s.ApiException as exc:
                if exc.status != 409:
                    raise
        deadline = time.monotonic() + READY_TIMEOUT
        for name in names:
            while not _established(extensions.read_custom_resource_definition(name)):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {name} not established within {READY_TIMEOUT:.0f} s")
                time.sleep(0.2)
        lease = int(timings["lease_duration"])
        self._create("leaderelections", "LeaderElection", election, {
            "leaseDurationSeconds": lease,
            "renewDeadlineSeconds": timings["renew_deadline"],
            "retryPeriodSeconds": timings["retry_period"],
        })
        self._create("groups", "Group", group, {
            "leaseDurationSeconds": lease, "renewIntervalSeconds": timings["retry_period"],
        })
        self._create("kvstores", "KVStore", store, {})

    def _create(self, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}
        try:
            self._custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise

    def start(self, *, election: str) -> None:
        """Start the operator and wait until it created the election's Lease."""
        log = self.workdir / "operator.log"
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "kubecoord.cli", "--log-level", "INFO", "--log-format", "text",
            "operator", "--namespace", self.namespace, "--kubeconfig", str(self.kubeconfig),
            "--identity", "soak-operator", "--lease-namespace", self.namespace,
            "--health-port", str(free_port()), "--metrics-port", "0", "--bind", "127.0.0.1",
        ]  # fmt: skip
        if self.history is not None:
            command += ["--history", str(self.history)]
        with open(log, "ab") as output:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
        leases = k8s.CoordinationV1Api(self._api)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the operator exited ({self.process.returncode}); see {log}")
            try:
                leases.read_namespaced_lease(election, self.namespace)
                return
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"the operator did not create lease/{election} within {READY_TIMEOUT:.0f} s")
            time.sleep(0.3)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None:
            processes.stop(self.process, 30)
        with contextlib.suppress(Exception):
            self._api.close()  # type: ignore[no-untyped-call]


def _established(crd: Any) -> bool:
    conditions = getattr(getattr(crd, "status", None), "conditions", None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)
