"""How long the ``kubecoord`` command takes, as whole processes, beside ``kubectl get`` on
the same real kube-apiserver (../shared/k8s): --help, --version and the state commands
(leader, members, kv get, kv ls, status). Startup is what a person at a terminal feels;
the target is 0.3 s, kubectl's order of magnitude.

Each command runs RUNS times after one warm-up (the page cache holds the interpreter and
the client libraries, as it does for a user who typed a command a minute ago); the
figures are the median and the 90th percentile of the wall time, with the machine's load,
and the API requests one run makes (the server's apiserver_request_total). The state
commands read once (kubecoord.cli.snapshot: no kubernetes client, no watch); ``python -c
pass`` is the floor any Python command pays on this machine at this load.

    .venv/bin/python bench/bench_cli.py [RUNS]
"""

from __future__ import annotations

import os
import pathlib
import resource
import subprocess
import sys
import time

import kubernetes

import kubecoord
from measure import load, pct
from real_server import RequestCounter, real_server

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent
NAMESPACE = "bench-cli"
TARGET_SECONDS = 0.3


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _background_rate(counter: RequestCounter, seconds: float = 6.0) -> float:
    """Requests per second the bench's own clients make meanwhile (the leader renewing, the
    member's heartbeat), subtracted from each command's count."""
    before, started = counter.total(), time.perf_counter()
    time.sleep(seconds)
    return (counter.total() - before) / (time.perf_counter() - started)


def _time(argv: list[str], runs: int, env: dict[str, str],
          counter: RequestCounter, rate: float) -> tuple[list[float], list[float], int, float]:
    """(wall times, CPU times, last exit status, API requests per run): CPU time (user +
    system of the child) is what the command costs; wall time adds the machine's queue."""
    warm = subprocess.run(argv, capture_output=True, env=env, check=False, text=True)
    if warm.returncode:
        print(f"  ({' '.join(argv[:3])}...: exit {warm.returncode}: {warm.stderr.strip()[:200]})")
    samples, cpu, status = [], [], 0
    before, began = counter.total(), time.perf_counter()
    for _ in range(runs):
        started, cpu_before = time.perf_counter(), _cpu()
        status = subprocess.run(argv, capture_output=True, env=env, check=False).returncode
        samples.append(time.perf_counter() - started)
        cpu.append(_cpu() - cpu_before)
    background = rate * (time.perf_counter() - began)
    return samples, cpu, status, max(0.0, counter.total() - before - background) / runs


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
                ("kubectl get le", [str(kubectl), "get", "le", "-n", NAMESPACE]),
                ("kubectl get lease bench-election", [str(kubectl), "get", "lease", "bench-election", "-n", NAMESPACE]),
                ("python -c pass", [sys.executable, "-c", "pass"]),
                ("kubecoord --help", [*cli, "--help"]),
                ("kubecoord --version", [*cli, "--version"]),
                ("kubecoord leader bench-election", [*cli, "leader", "bench-election", *state]),
                ("kubecoord members workers", [*cli, "members", "workers", *state]),
                ("kubecoord kv get topics orders/config", [*cli, "kv", "get", "topics", "orders/config", *state]),
                ("kubecoord kv ls topics", [*cli, "kv", "ls", "topics", *state]),
                ("kubecoord status", [*cli, "status", "-n", NAMESPACE]),
            ]
            counter = RequestCounter(server)
            rate = _background_rate(counter)
            print(f"{'command':<42} {'median':>8} {'p90':>8} {'CPU':>7}  exit  requests  (runs {runs}, load {load()})")
            slow, kubectl_median = [], 0.0
            for label, command in commands:
                samples, cpu, status, requests = _time(command, runs, env, counter, rate)
                median, p90, cpu_median = pct(samples, 50), pct(samples, 90), pct(cpu, 50)
                kubectl_median = median if label == "kubectl get le" else kubectl_median
                ratio = f"  {median / kubectl_median:.1f}x kubectl get le" if kubectl_median else ""
                print(f"{label:<42} {median * 1000:>6.0f}ms {p90 * 1000:>6.0f}ms {cpu_median * 1000:>5.0f}ms"
                      f"  {status:>4}  {requests:>8.1f}{ratio}")
                if label.startswith("kubecoord") and median > TARGET_SECONDS:
                    slow.append(label)
            print(f"load after: {load()}")
            if slow:
                print(f"over {TARGET_SECONDS} s (median): {', '.join(slow)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
