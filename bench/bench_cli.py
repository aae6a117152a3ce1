"""How long the ``kubecoord`` command takes, as whole processes, beside ``kubectl get`` on
the same real kube-apiserver (../shared/k8s): --help, --version and the state commands
(leader, members, kv get, kv ls, status). Startup is what a person at a terminal feels;
the target is 0.3 s, kubectl's order of magnitude.

Each command runs RUNS times after one warm-up (the page cache holds the interpreter and
the client libraries, as it does for a user who typed a command a minute ago); the
figures are the minimum, median and maximum of the wall time and the median CPU time
(user + system of the process: what the command costs, whatever the machine's queue),
with the machine's load before and after, and the API requests one run makes (the
server's apiserver_request_total). The server is a whole cluster (controller manager,
scheduler, a hollow node: ``refk8s.sh up DIR --cluster``), as a user's would be. The state
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


def _reads(counter: RequestCounter) -> int:
    """GET and LIST requests so far: what a read command sends. The cluster's own
    components and the bench's leader and member mostly write and watch (PUT, WATCH), so
    their share, subtracted below, stays small beside a command's 1-3 reads."""
    return counter.total("GET") + counter.total("LIST")


def _background_rate(counter: RequestCounter, seconds: float = 6.0) -> float:
    """Requests per second the bench's own clients make meanwhile (the leader renewing, the
    member's heartbeat), subtracted from each command's count."""
    before, started = _reads(counter), time.perf_counter()
    time.sleep(seconds)
    return (_reads(counter) - before) / (time.perf_counter() - started)


def _time(argv: list[str], runs: int, env: dict[str, str],
          counter: RequestCounter, rate: float) -> tuple[list[float], list[float], int, float]:
    """(wall times, CPU times, last exit status, API requests per run): CPU time (user +
    system of the child) is what the command costs; wall time adds the machine's queue."""
    warm = subprocess.run(argv, capture_output=True, env=env, check=False, text=True)
    if warm.returncode:
        print(f"  ({' '.join(argv[:3])}...: exit {warm.returncode}: {warm.stderr.strip()[:200]})")
    samples, cpu, status = [], [], 0
    before, began = _reads(counter), time.perf_counter()
    for _ in range(runs):
        started, cpu_before = time.perf_counter(), _cpu()
        status = subprocess.run(argv, capture_output=True, env=env, check=False).returncode
        samples.append(time.perf_counter() - started)
        cpu.append(_cpu() - cpu_before)
    background = rate * (time.perf_counter() - began)
    return samples, cpu, status, max(0.0, _reads(counter) - before - background) / runs


def _prepare(kubeconfig: pathlib.Path) -> None:
    """A namespace with the CRDs, one election with a leader, a group with members, a store."""
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespace(
        {"metadata": {"name": NAMESPACE}}  # type: ignore[arg-type]  # the client serializes a dict body as it is
    )
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
    with real_server(cluster=True) as server:
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
            # Bytecode cached, as an installed wheel has it (pip compiles at install): with
            # PYTHONDONTWRITEBYTECODE set (this machine sets it), an editable install would
            # compile the ~25 kubecoord modules of a command on every run.
            env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
                   "KUBECONFIG": str(kubeconfig)}
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
            print(f"runs {runs} each; load before: {load()}")
            print(f"{'command':<42} {'min':>7} {'median':>7} {'max':>7} {'CPU':>6}  exit  requests")
            slow, kubectl_median, kubectl_cpu = [], 0.0, 0.0
            for label, command in commands:
                samples, cpu, status, requests = _time(command, runs, env, counter, rate)
                median, cpu_median = pct(samples, 50), pct(cpu, 50)
                if label == "kubectl get le":
                    kubectl_median, kubectl_cpu = median, cpu_median
                ratio = (f"  {median / kubectl_median:.1f}x kubectl get le (CPU {cpu_median / kubectl_cpu:.1f}x)"
                         if kubectl_median and kubectl_cpu else "")
                print(f"{label:<42} {min(samples) * 1000:>5.0f}ms {median * 1000:>5.0f}ms {max(samples) * 1000:>5.0f}ms"
                      f" {cpu_median * 1000:>4.0f}ms  {status:>4}  {requests:>8.1f}{ratio}")
                if label.startswith("kubecoord") and median > TARGET_SECONDS:
                    slow.append(label)
            print(f"load after: {load()}")
            if slow:
                print(f"over {TARGET_SECONDS} s (median): {', '.join(slow)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
