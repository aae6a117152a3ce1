"""The operator run locally, as a user runs it, on the real kube-apiserver: what it logs at
the default level, and /healthz and /readyz when its ServiceAccount lacks rights or the API
server cannot be reached.

The ServiceAccount may run the operator's election (its Lease, as the chart's
leader-election Role allows) but not the reads kopf's watches need; the operator becomes
the leader, kopf retries its refused requests, and the replica must say it cannot work.
Then it gets the chart's rules (kubecoord.resourceRules, rendered) but one write, and must
still say it cannot work, naming that write; with the chart's rules whole it is ready.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

import kubecoord
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.kubernetes import RealApiServer
from kubecoord_testkit.servers.managed import free_port
from tests.chart import conftest as chart_fixtures
from tests.chart.conftest import CHART, run_helm
from tests.fixtures.real_kubernetes import MintKubeconfig, create_namespace, install_crds
from tests.helpers import eventually

pytestmark = pytest.mark.slow

helm = chart_fixtures.helm


def _get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)
    except OSError:
        return 0, {}


class LocalOperator:
    """``kubecoord operator`` as a process at the default log level (no --log-level)."""

    def __init__(self, kubeconfig: pathlib.Path, namespace: str, folder: pathlib.Path) -> None:
        self.health, self.metrics = free_port(), free_port()
        self.log = folder / "operator.log"
        env = {k: v for k, v in os.environ.items() if k != "KUBECOORD_LOG_LEVEL"}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kubecoord.cli", "operator", "--namespace", namespace,
                 "--kubeconfig", str(kubeconfig), "--lease-namespace", namespace, "--identity", "local-1",
                 "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5",
                 "--health-port", str(self.health), "--metrics-port", str(self.metrics), "--bind", "127.0.0.1",
                 "--access-check-seconds", "0.5"],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip

    def lines(self) -> list[dict[str, Any]]:
        found = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def ours(self) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line["name"].startswith("kubecoord.")]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def lacking(real_admin_api: k8s.ApiClient, mint_kubeconfig: MintKubeconfig) -> tuple[str, pathlib.Path]:
    """A namespace and the kubeconfig of a ServiceAccount that may run the operator's election only."""
    install_crds(real_admin_api)
    namespace = create_namespace(real_admin_api, "health")
    rbac = k8s.RbacAuthorizationV1Api(real_admin_api)
    rbac.create_namespaced_role(namespace, {
        "metadata": {"name": "election"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                  {"apiGroups": ["kubecoord.dev"], "resources": ["leaderelections"], "verbs": ["get"]}],
    })  # fmt: skip
    kubeconfig = mint_kubeconfig(namespace, "operator")
    rbac.create_namespaced_role_binding(namespace, _binding("election", "Role", namespace))
    return namespace, kubeconfig


def _binding(name: str, kind: str, namespace: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}]}


def _chart_rules(helm: pathlib.Path, namespace: str) -> list[dict[str, Any]]:
    """The rules the chart gives a namespaced operator in each watched namespace."""
    rendered = run_helm(helm, "template", "kc", str(CHART), "--namespace", namespace, "--show-only",
                        "templates/rbac.yaml", "--set", "operator.allNamespaces=false")
    assert rendered.returncode == 0, rendered.stderr
    (role,) = [d for d in yaml.safe_load_all(rendered.stdout)
               if d and d["kind"] == "Role" and d["metadata"]["name"] == "kc-kubecoord"]
    return list(role["rules"])


def _grant_the_rest(admin_api: k8s.ApiClient, namespace: str, rules: list[dict[str, Any]]) -> None:
    """The discovery reads, and ``rules`` in the namespace (Role ``resources``)."""
    rbac = k8s.RbacAuthorizationV1Api(admin_api)
    cluster = f"discovery-{namespace}"
    rbac.create_cluster_role({"metadata": {"name": cluster}, "rules": [
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}]})
    binding = _binding(cluster, "ClusterRole", namespace)
    rbac.create_cluster_role_binding(binding)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "resources"}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, _binding("resources", "Role", namespace))


def _without(rules: list[dict[str, Any]], resource: str, verb: str) -> list[dict[str, Any]]:
    kept = [{**rule, "verbs": [v for v in rule["verbs"] if not (resource in rule["resources"] and v == verb)]}
            for rule in rules]
    return [rule for rule in kept if rule["verbs"]]


@pytest.fixture
def operators(tmp_path: pathlib.Path) -> Iterator[list[LocalOperator]]:
    started: list[LocalOperator] = []
    yield started
    for operator in started:
        operator.stop()


def test_refused_by_rbac_it_is_not_ready_says_why_and_recovers(
    real_admin_api: k8s.ApiClient, lacking: tuple[str, pathlib.Path], tmp_path: pathlib.Path,
    operators: list[LocalOperator], helm: pathlib.Path,
) -> None:
    namespace, kubeconfig = lacking
    operator = LocalOperator(kubeconfig, namespace, tmp_path)
    operators.append(operator)

    def refused() -> bool:
        code, body = _get(operator.health, "/readyz")
        return code == 503 and "RBAC" in str(body.get("problem"))

    eventually(refused, 60, interval=0.2)
    code, body = _get(operator.health, "/healthz")
    assert code == 200 and body["ok"] is False and body["live"] is True, body  # a restart would not help
    assert "forbidden" in body["problem"] and "system:serviceaccount:" in body["problem"]
    eventually(lambda: any(line["message"].startswith("leading") for line in operator.ours()), 60, interval=0.2)
    assert _get(operator.health, "/readyz")[0] == 503  # leading, and still not able to work

    # At the default level: one start-up line, the role changes, the access problem once.
    ours = operator.ours()
    starts = [line for line in ours if line["name"] == "kubecoord.operator.lifecycle"]
    assert len(starts) == 1, starts
    start = starts[0]
    assert start["level"] == "INFO" and start["version"] == kubecoord.__version__
    assert start["namespaces"] == [namespace] and start["lease"] == f"{namespace}/kubecoord-operator"
    assert start["role"] == "standby" and kubecoord.__version__ in start["message"]
    problems = [line for line in ours if line["name"] == "kubecoord.operator.access"]
    assert [line["level"] for line in problems] == ["ERROR"], problems  # not once per probe (every 0.5 s)

    metrics = urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics}/metrics", timeout=5).read().decode()
    assert "kubecoord_operator_reconciles_total" in metrics or "_total" in metrics
    assert "_created" not in metrics

    # Every read granted, and the chart's rules but one write: still not ready, saying which.
    rules = _chart_rules(helm, namespace)
    _grant_the_rest(real_admin_api, namespace, _without(rules, "configmaps", "delete"))

    def write_refused() -> bool:
        code, body = _get(operator.health, "/readyz")
        return code == 503 and "may not delete configmaps (core) in namespace " + namespace in str(body.get("problem"))

    eventually(write_refused, 60, interval=0.2)
    code, body = _get(operator.health, "/healthz")
    assert code == 200 and body["ok"] is False and "SelfSubjectAccessReview" in body["problem"], body
    # The chart's rules whole: ready.
    k8s.RbacAuthorizationV1Api(real_admin_api).patch_namespaced_role("resources", namespace, {"rules": rules})
    eventually(lambda: _get(operator.health, "/readyz") == (200, {"role": "leader", "ok": True, "live": True}),
               60, interval=0.2)
    # Granted in steps, the problem may change on the way (a new line for a new problem).
    lines = [line for line in operator.ours() if line["name"] == "kubecoord.operator.access"]
    assert [line["level"] for line in lines][-1] == "WARNING" and "ready" in lines[-1]["message"]
    errors = [line["message"] for line in lines[:-1]]
    assert {line["level"] for line in lines[:-1]} == {"ERROR"} and len(set(errors)) == len(errors) <= 4, lines
    assert any("may not delete configmaps" in error for error in errors), errors


def test_an_unreachable_api_server_makes_it_not_ready(
    real_api: RealApiServer, real_admin_api: k8s.ApiClient, lacking: tuple[str, pathlib.Path],
    tmp_path: pathlib.Path, operators: list[LocalOperator], helm: pathlib.Path,
) -> None:
    namespace, kubeconfig = lacking
    _grant_the_rest(real_admin_api, namespace, _chart_rules(helm, namespace))
    config = yaml.safe_load(kubeconfig.read_text())
    host, port = real_api.url.removeprefix("https://").rsplit(":", 1)
    with ThreadedFaultProxy((host, int(port))) as proxy:
        config["clusters"][0]["cluster"]["server"] = f"https://{proxy.address}"
        proxied = tmp_path / "proxied-kubeconfig"
        proxied.write_text(yaml.safe_dump(config))
        operator = LocalOperator(proxied, namespace, tmp_path)
        operators.append(operator)
        eventually(lambda: _get(operator.health, "/readyz")[0] == 200, 60, interval=0.2)
        # Past its start (connected, leading): an API server unreachable at start ends the
        # process instead (a pod restarts), which is not what this test is about.
        eventually(lambda: any(line["message"].startswith("leading") for line in operator.ours()), 60,
                   interval=0.2)
        proxy.refuse()
        proxy.cut()

        def unreachable() -> bool:
            code, body = _get(operator.health, "/readyz")
            return code == 503 and "unreachable" in str(body.get("problem"))

        eventually(unreachable, 60, interval=0.2)
        proxy.refuse(False)
        proxy.heal()
        eventually(lambda: _get(operator.health, "/readyz")[0] == 200, 60, interval=0.2)
