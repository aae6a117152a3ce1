"""Group coordinator figures: rebalance times per backend, units moved per assignor, and
kazoo's SetPartitioner as the peer on ZooKeeper.

    .venv/bin/python bench/bench_coordinator.py [--rounds N]
        [--backends memory,zookeeper,kubernetes,real_kubernetes]

Prints:

- rebalance time, membership change -> every member stable in one generation with all 64
  units covered once, p50/p99 for a join, a graceful leave and a crash (simulate_crash():
  the kill -9 of a process, so it includes the backend's expiry and the session fence),
  per backend (memory; ZooKeeper from Debian's jars; the Kubernetes API emulator; the real
  kube-apiserver of ../shared/k8s with etcd, when its binaries are there);
- units moved per rebalance by the live sticky members, against the minimum;
- units moved by each assignor over a join/leave sequence, against the minimum any
  balanced assignment must move (kubecoord.group_coordinator.minimum_moves);
- on ZooKeeper, kazoo's SetPartitioner on the same server: join/leave/crash times and
  units moved (it re-partitions eagerly by sorted index after the party has been stable
  for time_boundary);
- API requests per rebalance and per member per idle minute (Kubernetes: the emulator's
  request record; the real server's apiserver_request_total), threads, RSS;
- the load average before and after (the machine is shared).

Wall-clock figures on a shared machine are noisy: compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import random
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubecoord
from kubecoord.group_coordinator import ASSIGNORS, GroupMember, Subscription, UnitsProtocol, decode_units, minimum_moves
from kubecoord.testing import crash
from measure import load, pct, rss_and_threads
from real_server import RequestCounter, real_server

UNITS = [f"u{i}" for i in range(64)]
GROUP_SESSION = 1.0



def wait(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not complete")
        time.sleep(0.002)



class Fleet:
    """Members of one group, each on its own coordinator (as separate processes would be)."""

    def __init__(self, connect: Callable[[], kubecoord.Coordinator]) -> None:
        self.connect = connect
        self.group = f"bench-{uuid.uuid4().hex[:8]}"
        self.members: dict[str, tuple[kubecoord.Coordinator, GroupMember]] = {}
        self.serial = 0
        self.moves: list[tuple[int, int]] = []

    def add(self) -> str:
        self.serial += 1
        name = f"m{self.serial}"
        coordinator = self.connect()
        member = coordinator.group_coordinator(self.group, UnitsProtocol(UNITS), member_id=name,
                                               session_timeout=GROUP_SESSION, rebalance_timeout=30)
        assert isinstance(member, GroupMember)
        member.join()
        self.members[name] = (coordinator, member)
        return name

    def holdings(self) -> dict[str, list[str]]:
        return {name: decode_units(m.assignment or b"")[0] for name, (_, m) in self.members.items()}

    def settled(self, above: int) -> bool:
        members = [m for _, m in self.members.values()]
        if not all(m.is_stable() for m in members) or len({m.generation for m in members}) != 1:
            return False
        if members[0].generation <= above:
            return False
        return sorted(u for units in self.holdings().values() for u in units) == sorted(UNITS)

    def generation(self) -> int:
        return max((m.generation for _, m in self.members.values()), default=0)

    def change(self, kind: str) -> float:
        before = self.holdings()
        generation = self.generation()
        start = time.monotonic()
        if kind == "join":
            self.add()
        else:
            name = sorted(self.members)[0]
            coordinator, member = self.members.pop(name)
            if kind == "leave":
                member.leave()
                coordinator.close()
            else:
                crash(coordinator)
        wait(lambda: self.settled(generation))
        elapsed = time.monotonic() - start
        after = self.holdings()
        owners = {m: set(units) for m, units in before.items()}
        moved = sum(1 for m, units in after.items() for u in units if u not in owners.get(m, set()))
        subs = {m: Subscription(tuple(before.get(m, ())), 1) for m in after}
        self.moves.append((moved, minimum_moves(UNITS, subs)))
        return elapsed

    def close(self) -> None:
        for coordinator, _ in self.members.values():
            coordinator.close()


def rebalance_times(label: str, connect: Callable[[], kubecoord.Coordinator], rounds: int,
                    count_requests: Callable[[], int] | None = None) -> dict[str, list[float]]:
    fleet = Fleet(connect)
    samples: dict[str, list[float]] = {"join": [], "leave": [], "crash": []}
    requests: list[int] = []
    try:
        for _ in range(4):
            fleet.add()
        wait(lambda: fleet.settled(0))
        if count_requests is not None:
            idle_start, idle_t = count_requests(), time.monotonic()
            time.sleep(10)
            idle = (count_requests() - idle_start) / (time.monotonic() - idle_t) * 60 / len(fleet.members)
        for _ in range(rounds):
            for kind in ("join", "leave", "join", "crash"):
                start = count_requests() if count_requests is not None else 0
                samples[kind].append(fleet.change(kind))
                if count_requests is not None:
                    requests.append(count_requests() - start)
        threads = threading.active_count()
    finally:
        fleet.close()
    for kind, values in samples.items():
        print(f"{label:<11} {kind:<6} rebalance p50 {pct(values, 50) * 1000:8.1f} ms  "
              f"p99 {pct(values, 99) * 1000:8.1f} ms  (n={len(values)})", flush=True)
    moved = sum(m for m, _ in fleet.moves)
    least = sum(n for _, n in fleet.moves)
    rss, _ = rss_and_threads()
    print(f"{label:<11} units moved by the live sticky members: {moved} over {len(fleet.moves)} rebalances "
          f"(minimum {least}, ratio {moved / least if least else float('nan'):.2f}); "
          f"threads {threads} with {len(fleet.members) + 1} coordinators; RSS {rss:.0f} MiB", flush=True)
    if count_requests is not None:
        print(f"{label:<11} API requests per rebalance p50 {pct([float(r) for r in requests], 50):.0f} "
              f"p99 {pct([float(r) for r in requests], 99):.0f}; idle {idle:.1f} requests per member per minute",
              flush=True)
    return samples


def assignor_moves(rounds: int = 200, seed: int = 5) -> None:
    """Units moved by each assignor over random joins and leaves (2..8 members), vs the minimum."""
    rng = random.Random(seed)
    members = ["a", "b", "c", "d"]
    events: list[list[str]] = []
    serial = 0
    for _ in range(rounds):
        if len(members) <= 2 or (len(members) < 8 and rng.random() < 0.5):
            serial += 1
            members = [*members, f"n{serial}"]
        else:
            members = [m for m in members if m != rng.choice(members)]
        events.append(list(members))
    print(f"assignors over {rounds} joins/leaves of 2-8 members sharing {len(UNITS)} units:", flush=True)
    for name, cls in ASSIGNORS.items():
        assignor = cls()
        owned: dict[str, list[str]] = {}
        total = least = 0
        for live in events:
            subs = {m: Subscription(tuple(owned.get(m, ())), 1) for m in live}
            least += minimum_moves(UNITS, subs)
            result = assignor.assign(UNITS, subs)
            if assignor.rebalance_protocol == "cooperative":  # the follow-up generation hands the rest on
                subs = {m: Subscription(tuple(result[m]), 2) for m in live}
                result = assignor.assign(UNITS, subs)
            total += sum(1 for m, units in result.items() for u in units if u not in set(owned.get(m, ())))
            owned = result
        print(f"  {name:<20} moved {total:6d}   minimum {least:6d}   ratio {total / least:5.2f}", flush=True)


def set_partitioner(hosts: str, rounds: int, time_boundary: float) -> None:
    """kazoo's SetPartitioner on the same server: join, leave (finish) and crash."""
    from kazoo.client import KazooClient

    path = f"/bench-partitioner-{uuid.uuid4().hex[:8]}"
    party: dict[str, tuple[KazooClient, Any, threading.Event]] = {}
    drivers: dict[str, threading.Thread] = {}
    serial = 0

    def drive(partitioner: Any, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if partitioner.failed:
                    return
                if partitioner.release:
                    partitioner.release_set()
                elif partitioner.allocating:
                    partitioner.wait_for_acquire(timeout=0.05)
                else:
                    time.sleep(0.002)
            except Exception:  # a crashed client's partitioner fails: it is gone
                return

    def add() -> None:
        nonlocal serial
        serial += 1
        client = KazooClient(hosts=hosts, timeout=2.0)
        client.start(timeout=15)
        partitioner = client.SetPartitioner(path, set=UNITS, time_boundary=time_boundary, identifier=f"p{serial}")
        stop = threading.Event()
        drivers[f"p{serial}"] = threading.Thread(target=drive, args=(partitioner, stop), daemon=True)
        drivers[f"p{serial}"].start()
        party[f"p{serial}"] = (client, partitioner, stop)

    def finish(name: str, client: KazooClient, partitioner: Any, stop: threading.Event) -> None:
        stop.set()
        drivers[name].join(5)
        with contextlib.suppress(Exception):  # kazoo's finish() can trip over its own lock list
            partitioner.finish()
        client.stop()
        client.close()

    def holdings() -> dict[str, list[str]]:
        return {name: list(p) if p.acquired else [] for name, (_, p, _) in party.items()}

    def settled() -> bool:
        if not all(p.acquired for _, p, _ in party.values()):
            return False
        return sorted(u for units in holdings().values() for u in units) == sorted(UNITS)

    samples: dict[str, list[float]] = {"join": [], "leave": [], "crash": []}
    moves: list[tuple[int, int]] = []
    for _ in range(4):
        add()
    wait(settled, 120)
    for _ in range(rounds):
        for kind in ("join", "leave", "join", "crash"):
            before = holdings()
            start = time.monotonic()
            if kind == "join":
                add()
            else:
                name = sorted(party)[0]
                client, partitioner, stop = party.pop(name)
                if kind == "leave":
                    finish(name, client, partitioner, stop)
                else:  # as kill -9: the socket drops, no CloseSession
                    stop.set()
                    client._stopped.set()
                    client._connection._socket.shutdown(2)
            # A membership change is acted on only after the party was stable for time_boundary.
            wait(settled, 120)
            samples[kind].append(time.monotonic() - start)
            after = holdings()
            owners = {m: set(u) for m, u in before.items()}
            moved = sum(1 for m, units in after.items() for u in units if u not in owners.get(m, set()))
            subs = {m: Subscription(tuple(before.get(m, ())), 1) for m in after}
            moves.append((moved, minimum_moves(UNITS, subs)))
    for name, (client, partitioner, stop) in party.items():
        finish(name, client, partitioner, stop)
    for kind, values in samples.items():
        print(f"{'kazoo-set':<11} {kind:<6} rebalance p50 {pct(values, 50) * 1000:8.1f} ms  "
              f"p99 {pct(values, 99) * 1000:8.1f} ms  (n={len(values)}, time_boundary {time_boundary} s)", flush=True)
    moved, least = sum(m for m, _ in moves), sum(n for _, n in moves)
    print(f"{'kazoo-set':<11} units moved: {moved} over {len(moves)} rebalances (minimum {least}, "
          f"ratio {moved / least if least else float('nan'):.2f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="join/leave/join/crash cycles per backend")
    parser.add_argument("--backends", default="memory,zookeeper,kubernetes,real_kubernetes")
    parser.add_argument("--time-boundary", type=float, default=1.0, help="SetPartitioner's stability wait")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    backends = args.backends.split(",")
    print(f"at the start: {load()}", flush=True)
    print(f"group session_timeout {GROUP_SESSION} s; {len(UNITS)} units; 4-5 members; sticky assignor", flush=True)
    assignor_moves()
    ours: dict[str, dict[str, list[float]]] = {}
    if "memory" in backends:
        url = f"memory://bench-{uuid.uuid4().hex[:6]}"
        ours["memory"] = rebalance_times("memory", lambda: kubecoord.connect(url, lease_duration=1.0), args.rounds)
    if "zookeeper" in backends:
        from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

        with tempfile.TemporaryDirectory() as root:
            server = ZooKeeperServer.standalone(Path(root))
            server.start()
            try:
                url = f"zookeeper://{server.hosts}/bench-{uuid.uuid4().hex[:6]}"
                ours["zookeeper"] = rebalance_times(
                    "zookeeper", lambda: kubecoord.connect(url, lease_duration=2.0), args.rounds
                )
                set_partitioner(server.hosts, args.rounds, args.time_boundary)
            finally:
                server.stop()
    if "kubernetes" in backends:
        from kubecoord_testkit.emulator import ApiEmulator

        with tempfile.TemporaryDirectory() as root, ApiEmulator(host="127.0.0.1", port=0) as api:
            config = str(api.write_kubeconfig(Path(root) / "kubeconfig"))
            timings: dict[str, Any] = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
            ours["kubernetes"] = rebalance_times(
                "kubernetes", lambda: kubecoord.connect("kubernetes://default", kubeconfig=config, **timings),
                args.rounds, count_requests=lambda: len(api.requests),
            )
    if "real_kubernetes" in backends:
        with real_server() as real:
            if real is not None:
                counter = RequestCounter(real)
                config = str(real.admin_kubeconfig)
                timings = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
                ours["real_kubernetes"] = rebalance_times(
                    "real-k8s", lambda: kubecoord.connect("kubernetes://default", kubeconfig=config, **timings),
                    args.rounds, count_requests=counter.total,
                )
    print(f"at the end: {load()}", flush=True)
    print("timings: memory session 1 s; zookeeper session 2 s; kubernetes lease 3 s / renew deadline 2 s / "
          "retry 0.5 s; a crash adds the group session fence", flush=True)


if __name__ == "__main__":
    main()
