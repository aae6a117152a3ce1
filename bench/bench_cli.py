"""How long the ``kubecoord`` command takes, as whole processes, beside ``kubectl get`` on
the same real kube-apiserver (../shared/k8s): --help, --version and the state commands
(leader, members, kv get, kv ls, status). Startup is what a person at a terminal feels;
the target is 0.3 s, kubectl's order of magnitude.

Each command runs RUNS times after one warm-up (the page cache holds the interpreter and
the client libraries, as it does for a user who typed a command a minute ago); the
figures are the median and the 90th percentile of the wall time, with the machine's load.

    .venv/bin/python bench/bench_cli.py [RUNS]
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import kubernetes

import kubecoord
from measure import load, pct
from real_server import real_server

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent
NAMESPACE = "bench-cli"
TARGET_SECONDS = 0.3


def _time(argv: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], int]:
    warm = subprocess.run(argv, capture_output=True, env=env, check=False, text=True)
    if warm.returncode:
        print(f"  ({' '.join(argv[:3])}...: exit {warm.returncode}: {warm.stderr.strip()[:200]})")
    samples, status = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        status = subprocess.run(argv, capture_output=True, env=env, check=False).returncode
        samples.append(time.perf_counter() - started)
    return samples, status


def _prepare(kubeconfig: pathlib.Path) -> None:
    """A namespace with the CRDs, one election with a leader, a group with members, a store."""
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    subprocess.run([str(BIN / "kubectl"), "--kubeconfig", str(kubeconfig), "apply", "--server-side", "-f",
                    str(ROOT / "crds")], check=True, capture_output=True)
    subprocess.run([str(BIN / "kubectl"), "--kubeconfig", str(kubeconfig), "wait", "--for=condition=Established",
                    "-f", str(ROOT / "crds")], check=True, capture_output=True)
    custom = kubernetes.client.CustomObjectsApi(client)
    for plural, kind, name in (("leaderelections", "LeaderElection", "billing"), ("groups", "Group", "workers"),
                               ("kvstores", "KVStore", "topics")):
        custom.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", NAMESPACE, plural, {
            "apiVersion": "kubecoord.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": {}})
    client.close()


def main(argv: list[str]) -> int:
    runs = int(argv[1]) if len(argv) > 1 else 10
    kubectl = BIN / "kubectl"
    if not kubectl.exists():
        subprocess.run([sys.executable, str(ROOT / "charts/scripts/install_helm.py"), str(kubectl), "--kubectl"],
                       check=True)
    with real_server() as server:
        if server is None:
            return 0
        kubeconfig = server.admin_kubeconfig
        _prepare(kubeconfig)
        url = f"kubernetes://{NAMESPACE}"
        with kubecoord.connect(url, kubeconfig=str(kubeconfig)) as coord:
            # An election no LeaderElection declares (a client-go style Lease): the client
            # creates its Lease itself; a declared one waits for the operator, not running here.
            coord.leader_election("bench-election").nominate("pod-a")
            coord.group_membership("workers").join("w1")
            coord.storage("topics").put("orders/config", "partitions=3")
            env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
            cli = [str(BIN / "kubecoord")]
            state = ["--url", url]
            commands = [
                ("kubecoord --help", [*cli, "--help"]),
                ("kubecoord --version", [*cli, "--version"]),
                ("kubecoord leader bench-election", [*cli, "leader", "bench-election", *state]),
                ("kubecoord members workers", [*cli, "members", "workers", *state]),
                ("kubecoord kv get topics orders/config", [*cli, "kv", "get", "topics", "orders/config", *state]),
                ("kubecoord kv ls topics", [*cli, "kv", "ls", "topics", *state]),
                ("kubecoord status", [*cli, "status", "-n", NAMESPACE]),
                ("kubectl get le", [str(kubectl), "get", "le", "-n", NAMESPACE]),
                ("kubectl get lease bench-election", [str(kubectl), "get", "lease", "bench-election", "-n", NAMESPACE]),
                ("python -c pass", [sys.executable, "-c", "pass"]),
            ]
            print(f"{'command':<42} {'median':>8} {'p90':>8}  exit  (runs {runs}, load {load()})")
            slow = []
            for label, command in commands:
                samples, status = _time(command, runs, env)
                median, p90 = pct(samples, 50), pct(samples, 90)
                print(f"{label:<42} {median * 1000:>6.0f}ms {p90 * 1000:>6.0f}ms  {status:>4}")
                if label.startswith("kubecoord") and median > TARGET_SECONDS:
                    slow.append(label)
            print(f"load after: {load()}")
            if slow:
                print(f"over {TARGET_SECONDS} s (median): {', '.join(slow)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
