"""Benchmark of the Kubernetes backend on the in-process API emulator, side by side with
the official Python client's leader election (kubernetes.leaderelection, LeaseLock).

    .venv/bin/python bench/bench_kubernetes.py [--runs 50] [--crash-runs 8]

Prints, with 3 candidates (each its own coordinator and service-account token, so the
emulator attributes every request to the candidate that made it):

- graceful handover: resign() -> another candidate leads (p50/p99 over --runs); the
  official client cannot release, so its "handover" is a leader that exits (SIGTERM);
- crash failover: kill -9 of the leading process -> a new leader (2 s lease);
- value-listener latency: a write here -> the listener's call in another process;
- API requests per operation and idle requests per second per follower;
- ratios kubecoord / official for handover time and idle load.

Timings for both clients: lease 2 s, renew deadline 1.5 s, retry period 1 s (the
official client refuses a retry period under 1 s). Figures depend on the machine; the
ratios and request counts are what to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import kubecoord
from kubecoord_testkit.emulator import ApiEmulator
from measure import pct

LEASE, DEADLINE, RETRY = 2.0, 1.5, 1.0
TIMINGS: dict[str, Any] = {"lease_duration": LEASE, "renew_deadline": DEADLINE, "retry_period": RETRY}


# -- child processes ------------------------------------------------------------------------


def _emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"t": time.time(), "event": event, **fields}) + "\n")
    sys.stdout.flush()


def child_kubecoord(kubeconfig: str, service: str, ident: str) -> None:
    election = kubecoord.connect("kubernetes://default", kubeconfig=kubeconfig, **TIMINGS).leader_election(service)
    election.nominate(ident)
    leading = False
    while True:
        if election.is_leader() != leading:
            leading = not leading
            _emit("leading" if leading else "following")
        time.sleep(0.001)


def child_official(kubeconfig: str, service: str, ident: str) -> None:
    from kubernetes import config
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    config.load_kube_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # exits without releasing: it cannot
    lock = LeaseLock(service, "default", ident)  # type: ignore[no-untyped-call]
    # its LeaseLock does int(str(lease_duration)): "2.0" fails, 2 works
    cfg = electionconfig.Config(  # type: ignore[no-untyped-call]
        lock, int(LEASE), DEADLINE, int(RETRY), onstarted_leading=lambda: _emit("leading"),
        onstopped_leading=lambda: _emit("following"),
    )
    leaderelection.LeaderElection(cfg).run()  # type: ignore[no-untyped-call]
    threading.Event().wait()


def child_listen(kubeconfig: str, store: str, key: str) -> None:
    registry = kubecoord.connect("kubernetes://default", kubeconfig=kubeconfig).listener_registry(store)
    registry.add_value_change_listener(key, lambda value: _emit("value", value=value))
    kubecoord.connect("kubernetes://default", kubeconfig=kubeconfig).storage(store).fetch(key).result()
    _emit("ready")
    threading.Event().wait()


class Child:
    def __init__(self, mode: str, args: list[str]) -> None:
        self.lines: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--child", mode, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            with self.cond:
                self.lines.append(json.loads(raw))
                self.cond.notify_all()

    def first(self, event: str, after: float, timeout: float = 30) -> float | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if line["event"] == event and line["t"] >= after:
                        return float(line["t"])
                if time.monotonic() > deadline:
                    return None
                self.cond.wait(0.05)

    def leading(self) -> bool:
        with self.cond:
            states = [line["event"] for line in self.lines if line["event"] in ("leading", "following")]
        return bool(states) and states[-1] == "leading"

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait()


# -- the benchmark ------------------------------------------------------------------------


class Bench:
    def __init__(self, api: ApiEmulator, directory: pathlib.Path) -> None:
        self.api, self.directory = api, directory
        self.children: list[Child] = []
        self.coordinators: list[kubecoord.Coordinator] = []
        self.serial = 0
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(api.write_kubeconfig(directory / "admin")), client_configuration=configuration
        )
        rbac = client.RbacAuthorizationV1Api(client.ApiClient(configuration))
        rbac.create_namespaced_role("default", {  # type: ignore[arg-type]  # the client serializes a dict body as it is
            "metadata": {"name": "bench"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
            ],
        })
        rbac.create_namespaced_role_binding(
            "default",
            {  # type: ignore[arg-type]  # the client serializes a dict body as it is
                "metadata": {"name": "bench"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bench"},
                "subjects": [{"kind": "Group", "name": "system:serviceaccounts:default",
                              "apiGroup": "rbac.authorization.k8s.io"}],
            },
        )

    def identity(self) -> tuple[str, str]:
        """A fresh service account: (its user name as the emulator records it, a kubeconfig)."""
        self.serial += 1
        name = f"c{self.serial}"
        token = self.api.token_for_service_account("default", name)
        kubeconfig = str(self.api.write_kubeconfig(self.directory / name, token=token))
        return f"system:serviceaccount:default:{name}", kubeconfig

    def spawn(self, mode: str, *args: str) -> tuple[str, Child]:
        user, kubeconfig = self.identity()
        child = Child(mode, [kubeconfig, *args])
        self.children.append(child)
        return user, child

    def connect(self, **options: Any) -> tuple[str, kubecoord.Coordinator]:
        user, kubeconfig = self.identity()
        coordinator = kubecoord.connect("kubernetes://default", kubeconfig=kubeconfig, **{**TIMINGS, **options})
        self.coordinators.append(coordinator)
        return user, coordinator

    def requests_by(self, users: set[str], *, watches: bool = False) -> int:
        return sum(1 for r in self.api.requests if r.user in users and (watches or not r.watch))

    def close(self) -> None:
        for child in self.children:
            child.stop()
        for coordinator in self.coordinators:
            coordinator.close()

    # -- leader election --------------------------------------------------------------
    def graceful_handover(self, runs: int) -> list[float]:
        service = f"handover-{uuid.uuid4().hex[:6]}"
        elections = [self.connect()[1].leader_election(service) for _ in range(3)]
        won = [threading.Event() for _ in elections]
        for index, election in enumerate(elections):

            def on_leader(leader: str | None, i: int = index) -> None:
                if leader == f"k{i}":
                    won[i].set()

            election.add_listener(on_leader)
            election.nominate(f"k{index}")
        samples = []
        for _ in range(runs):
            leader = next(i for i, e in enumerate(elections) if e.is_leader())
            for event in won:
                event.clear()
            start = time.perf_counter()
            elections[leader].resign(f"k{leader}")
            while not any(won[i].is_set() for i in range(3) if i != leader):
                time.sleep(0.0002)
            samples.append(time.perf_counter() - start)
            elections[leader].nominate(f"k{leader}")
        return samples

    def process_failovers(self, mode: str, runs: int, sig: int) -> list[float]:
        service = f"{mode}-{sig}-{uuid.uuid4().hex[:6]}"
        serial = iter(range(10_000))
        live = [self.spawn(mode, service, f"p{next(serial)}")[1] for _ in range(3)]
        samples = []
        for _ in range(runs):
            leader = self._wait_leading(live)
            time.sleep(RETRY * 1.5)  # a settled term: followers have seen renewals
            live.remove(leader)
            stopped = time.time()
            leader.stop(sig)
            live.append(self.spawn(mode, service, f"p{next(serial)}")[1])
            taken = self._first_leading(live, stopped)
            if taken is not None:
                samples.append(taken - stopped)
        for child in live:
            child.stop()
        return samples

    @staticmethod
    def _first_leading(children: list[Child], after: float, timeout: float = 30) -> float | None:
        """When the first of ``children`` reported leading after ``after`` (wall clock)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            times = [c.first("leading", after, timeout=0) for c in children]
            found = [t for t in times if t is not None]
            if found:
                return min(found)
            time.sleep(0.01)
        return None

    @staticmethod
    def _wait_leading(children: list[Child], timeout: float = 30) -> Child:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for child in children:
                if child.leading():
                    return child
            time.sleep(0.01)
        raise RuntimeError("no leader")

    def idle_followers(self, mode: str, seconds: float) -> float:
        """Requests per second per follower while nothing changes."""
        service = f"idle-{mode}-{uuid.uuid4().hex[:6]}"
        spawned = [self.spawn(mode, service, f"i{n}") for n in range(3)]
        leader = self._wait_leading([child for _, child in spawned])
        deadline = time.monotonic() + 30
        while {user for user, _ in spawned} - {r.user for r in self.api.requests} and time.monotonic() < deadline:
            time.sleep(0.05)  # every process has started talking to the API
        time.sleep(LEASE)  # start-up requests (lists, watches) are not idle load
        followers = {user for user, child in spawned if child is not leader}
        before = self.requests_by(followers, watches=True)
        time.sleep(seconds)
        after = self.requests_by(followers, watches=True)
        for _, child in spawned:
            child.stop()
        return (after - before) / seconds / len(followers)

    def official_requests_per_renewal(self, seconds: float) -> float:
        """API requests per successful renewal (update) of a lone official leader."""
        service = f"renew-official-{uuid.uuid4().hex[:6]}"
        user, child = self.spawn("official", service, "solo")
        self._wait_leading([child])
        before = len(self.api.requests)
        time.sleep(seconds)
        mine = [r for r in self.api.requests[before:] if r.user == user and not r.watch]
        child.stop()
        return len(mine) / max(1, sum(r.verb == "update" for r in mine))

    # -- requests per operation ---------------------------------------------------------
    def requests_per_operation(self) -> dict[str, float]:
        counts: dict[str, float] = {}
        user, coordinator = self.connect()
        election = coordinator.leader_election(f"ops-{uuid.uuid4().hex[:6]}")
        before = self.requests_by({user}, watches=True)
        election.nominate("solo")
        counts["nominate (cold: list + watch + create)"] = self.requests_by({user}, watches=True) - before
        time.sleep(RETRY)
        before = len(self.api.requests)
        time.sleep(5 * RETRY)
        mine = [r for r in self.api.requests[before:] if r.user == user and not r.watch]
        counts["renew (requests per renewal)"] = len(mine) / max(1, sum(r.verb == "update" for r in mine))
        election.close()  # no renewals among the KV counts below
        kv = coordinator.storage(f"ops-{uuid.uuid4().hex[:6]}")
        before = self.requests_by({user}, watches=True)
        kv.put("first", "x")
        counts["put (cold store: list + watch + create)"] = self.requests_by({user}, watches=True) - before
        for label, operation in [
            ("put (warm)", lambda i: kv.put(f"k{i}", "v")),
            ("update (warm)", lambda i: kv.update(f"k{i}", "w")),
            ("update with expected_version (warm)", lambda i: kv.update(f"k{i}", "z", expected_version=2)),
            ("fetch (warm watch)", lambda i: kv.fetch(f"k{i}").result()),
            ("fetch_versioned (warm watch)", lambda i: kv.fetch_versioned(f"k{i}").result()),
        ]:
            counts[label] = self._average(user, operation)
        return counts

    def _average(self, user: str, operation: Callable[[int], Any], n: int = 20) -> float:
        before = self.requests_by({user})
        for i in range(n):
            operation(i)
        return (self.requests_by({user}) - before) / n

    # -- listeners ------------------------------------------------------------------------
    def listener_latency(self, writes: int) -> list[float]:
        store = f"latency-{uuid.uuid4().hex[:6]}"
        _, child = self.spawn("listen", store, "k")
        if child.first("ready", 0, timeout=30) is None:
            raise RuntimeError("listener process did not start")
        kv = self.connect()[1].storage(store)
        sent: dict[str, float] = {}
        for i in range(writes):
            value = f"v{i}"
            sent[value] = time.time()
            if i == 0:
                kv.put("k", value)
            else:
                kv.update("k", value)
            time.sleep(0.02)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(line.get("value") == f"v{writes - 1}" for line in child.lines):
            time.sleep(0.05)
        received = {line["value"]: line["t"] for line in child.lines if line["event"] == "value"}
        child.stop()
        return [received[value] - at for value, at in sent.items() if value in received]



def report(label: str, samples: list[float]) -> tuple[float, float]:
    p50, p99 = pct(samples, 50), pct(samples, 99)
    print(f"  {label:<48} p50 {p50 * 1000:9.1f} ms   p99 {p99 * 1000:9.1f} ms   (n={len(samples)})")
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--crash-runs", type=int, default=8)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, *rest = args.child
        {"kubecoord": child_kubecoord, "official": child_official, "listen": child_listen}[mode](*rest)
        return

    with ApiEmulator() as api, tempfile.TemporaryDirectory() as tmp:
        bench = Bench(api, pathlib.Path(tmp))
        try:
            print(f"Kubernetes backend on the API emulator; lease {LEASE} s, renew deadline {DEADLINE} s, "
                  f"retry {RETRY} s; 3 candidates")
            print("graceful handover (resign -> new leader)")
            ours, _ = report("kubecoord, in-process coordinators", bench.graceful_handover(args.runs))
            theirs, _ = report("official leaderelection (leader exits; no release)",
                               bench.process_failovers("official", args.crash_runs, signal.SIGTERM))
            print("crash failover (kill -9 of the leading process -> new leader)")
            crash_ours, _ = report("kubecoord", bench.process_failovers("kubecoord", args.crash_runs, signal.SIGKILL))
            crash_theirs, _ = report("official leaderelection",
                                     bench.process_failovers("official", args.crash_runs, signal.SIGKILL))
            print("value-listener latency (write here -> listener in another process)")
            report("kubecoord", bench.listener_latency(200))
            print("API requests per operation (kubecoord)")
            for label, count in bench.requests_per_operation().items():
                print(f"  {label:<48} {count:6.2f}")
            official_renew = bench.official_requests_per_renewal(5 * RETRY)
            print(f"  {'official client: renew (requests per renewal)':<48} {official_renew:6.2f}")
            print("idle requests per second per follower")
            idle_ours = bench.idle_followers("kubecoord", args.idle_seconds)
            idle_theirs = bench.idle_followers("official", args.idle_seconds)
            print(f"  {'kubecoord':<48} {idle_ours:6.3f}")
            print(f"  {'official leaderelection':<48} {idle_theirs:6.3f}")
            print("ratios (official / kubecoord)")
            print(f"  handover time p50: {theirs / ours:8.1f}x   crash failover p50: {crash_theirs / crash_ours:5.2f}x")
            idle_ratio = f"{idle_theirs / idle_ours:.1f}x" if idle_ours > 0 else "inf (no kubecoord follower request)"
            print(f"  idle load per follower: {idle_ratio}")
        finally:
            bench.close()


if __name__ == "__main__":
    main()
