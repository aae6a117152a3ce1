"""Operator benchmark: status lag and memory with many LeaderElection resources.

Runs ``kubecoord operator`` as a process against the in-process API emulator and prints:

- reconcile: seconds until N LeaderElection resources (default 500) are all Ready, and
  the API requests the operator made per resource for it;
- memory: the operator's RSS and thread count idle and with N resources mirrored;
- status lag: from a client's nominate()/resign() returning to the resource's status
  showing the new leader, observed through a watch on the resources (p50, p99, max);
  the same figure on an idle operator (few resources) for comparison.

Usage: python bench/bench_operator.py [--resources 500] [--changes 100]
Figures depend on the machine and its load (the emulator and the bench share it with the
operator); compare runs on one machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, cast

import kubernetes.client
import kubernetes.config
import urllib3
import yaml

import kubecoord
from kubecoord_testkit import processes
from kubecoord_testkit.emulator import ApiEmulator
from measure import ms, rss_and_threads

ROOT = pathlib.Path(__file__).resolve().parents[1]
NS = "default"
FAST = {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5}



class StatusWatch:
    """Watches LeaderElections; records when each resource's status.leader took each value."""

    def __init__(self, kubeconfig: str) -> None:
        self._client = kubernetes.config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        self.seen: dict[tuple[str, str | None], float] = {}
        self.ready: set[str] = set()
        self._cond = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        with contextlib.suppress(Exception):  # the emulator stops at the end of the run
            self._watch()

    def _watch(self) -> None:
        api = kubernetes.client.CustomObjectsApi(self._client)
        version = ""
        while True:
            response = cast(urllib3.HTTPResponse, api.list_namespaced_custom_object(  # _preload_content=False
                "kubecoord.dev", "v1alpha1", NS, "leaderelections", watch=True, resource_version=version,
                allow_watch_bookmarks=False, timeout_seconds=300, _preload_content=False,
            ))  # fmt: skip
            for line in response:
                event = json.loads(line)
                obj = event["object"]
                version = obj["metadata"].get("resourceVersion", version)
                now = time.monotonic()
                status = obj.get("status") or {}
                name = obj["metadata"]["name"]
                with self._cond:
                    self.seen.setdefault((name, status.get("leader")), now)
                    if any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []):
                        self.ready.add(name)
                    self._cond.notify_all()

    def wait(self, predicate: Any, timeout: float = 600) -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                raise RuntimeError("timed out")

    def forget(self, name: str) -> None:
        with self._cond:
            for key in [k for k in self.seen if k[0] == name]:
                del self.seen[key]


def create(custom: kubernetes.client.CustomObjectsApi, name: str) -> None:
    body = {"apiVersion": "kubecoord.dev/v1alpha1", "kind": "LeaderElection", "metadata": {"name": name}, "spec": FAST}
    custom.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", NS, "leaderelections", body)


def measure_lag(watch: StatusWatch, coord: Any, names: list[str], changes: int) -> list[float]:
    lags: list[float] = []
    for index in range(changes):
        name = names[index % len(names)]
        election = coord.leader_election(name)
        candidate = f"c{index}"
        election.nominate(candidate)
        started = time.monotonic()
        watch.wait(lambda name=name, candidate=candidate: (name, candidate) in watch.seen, timeout=60)
        lags.append(watch.seen[(name, candidate)] - started)
        election.close()  # resigns; the next change on this election starts from no leader
        watch.wait(lambda name=name: (name, None) in watch.seen, timeout=60)
        watch.forget(name)
    return lags



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=int, default=500)
    parser.add_argument("--changes", type=int, default=100)
    args = parser.parse_args()
    print(f"load average before the run: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp, ApiEmulator(host="127.0.0.1", port=0) as api:
        kubeconfig = str(api.write_kubeconfig(pathlib.Path(tmp) / "kubeconfig"))
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        for path in sorted((ROOT / "crds").glob("*.yaml")):
            kubernetes.client.ApiextensionsV1Api(client).create_custom_resource_definition(
                yaml.safe_load(path.read_text())
            )
        custom = kubernetes.client.CustomObjectsApi(client)
        env = {**os.environ, "KUBECONFIG": kubeconfig}
        operator = subprocess.Popen(
            [sys.executable, "-m", "kubecoord.cli", "operator", "--namespace", NS, "--lease-namespace", NS,
             "--health-port", "0", "--metrics-port", "0", "--bind", "127.0.0.1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            watch = StatusWatch(kubeconfig)
            samples = [f"lag-{i}" for i in range(10)]
            for name in samples:
                create(custom, name)
            watch.wait(lambda: len(watch.ready) >= len(samples))
            idle_rss, idle_threads = rss_and_threads(operator.pid)
            print(f"operator idle ({len(samples)} resources): RSS {idle_rss:.0f} MiB, {idle_threads} threads")
            with kubecoord.connect(f"kubernetes://{NS}", kubeconfig=kubeconfig) as coord:
                lags_idle = measure_lag(watch, coord, samples, args.changes // 2)
            print(f"status lag, {len(samples)} resources: {ms(lags_idle)}")

            api.reset_requests()
            started = time.monotonic()
            names = [f"le-{i:04d}" for i in range(args.resources)]
            for name in names:
                create(custom, name)
            created = time.monotonic() - started
            watch.wait(lambda: len(watch.ready) >= len(samples) + len(names))
            took = time.monotonic() - started
            requests = [r for r in api.requests if not (r.verb == "create" and r.resource == "leaderelections")]
            print(
                f"reconcile: {len(names)} LeaderElections Ready {took:.1f} s after the first create "
                f"(creating them took {created:.1f} s); {len(requests) / len(names):.1f} API requests per resource"
            )
            time.sleep(5)  # let the per-resource watches settle
            rss, threads = rss_and_threads(operator.pid)
            print(
                f"operator with {len(names) + len(samples)} resources: RSS {rss:.0f} MiB "
                f"(+{(rss - idle_rss) / len(names) * 1024:.0f} KiB per resource), {threads} threads"
            )
            with kubecoord.connect(f"kubernetes://{NS}", kubeconfig=kubeconfig) as coord:
                lags_busy = measure_lag(watch, coord, names, args.changes)
            total = len(names) + len(samples)
            print(f"status lag, {total} resources: {ms(lags_busy)}")
        finally:
            processes.stop(operator, 60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
