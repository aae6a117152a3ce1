"""ZooKeeper backend figures, side by side with kazoo's own recipes on the same server.

    .venv/bin/python bench/bench_zookeeper.py [--rounds N]

Starts a standalone ZooKeeper (Debian's jars) on 127.0.0.1 and prints:

- handover: resign() of the leader -> the next candidate leads (ours: is_leader() and
  its listener; kazoo: Election.run's function returns -> the next contender's starts);
- crash failover with a 2 s session: the leader's client dies as under kill -9 (socket
  closed, no CloseSession) -> the next candidate leads;
- listener latency: update() on one coordinator -> the value listener on another;
- operations per second, one thread: put / update / fetch against kazoo's create / set / get.

Wall-clock figures on a shared machine are noisy: compare the ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

import kubecoord
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from measure import pct

SESSION = 2.0



def line(label: str, ours: list[float], theirs: list[float] | None = None) -> None:
    text = f"{label:<34} ours p50 {pct(ours, 50) * 1000:8.2f} ms  p99 {pct(ours, 99) * 1000:8.2f} ms"
    if theirs:
        ratio = pct(ours, 50) / pct(theirs, 50)
        text += f" | kazoo p50 {pct(theirs, 50) * 1000:8.2f} ms  p99 {pct(theirs, 99) * 1000:8.2f} ms"
        text += f" | ratio {ratio:.2f}"
    print(text, flush=True)


def kazoo_client(hosts: str, timeout: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=15)
    return client


def crash_kazoo(client: KazooClient) -> None:
    """The kazoo analogue of kubecoord's simulate_crash(): drop the socket, no CloseSession."""
    client._stopped.set()
    client._connection._socket.shutdown(2)


def quietly(run: Callable[..., object], *args: object) -> None:
    """Election.run of a contender whose client the benchmark crashes: its release fails, as it would."""
    with contextlib.suppress(Exception):
        run(*args)


def wait(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not complete")
        time.sleep(0.0005)


def our_handover(url: str, rounds: int, crash: bool) -> list[float]:
    samples = []
    options: dict[str, Any] = {"lease_duration": SESSION}  # connect() takes **options: Any
    successor = kubecoord.connect(url, **options)
    try:
        for round_ in range(rounds):
            service = f"ho-{round_}"
            leader = kubecoord.connect(url, **options)
            leading = leader.leader_election(service)
            assert leading.nominate("a")
            follower = successor.leader_election(service)
            follower.nominate("b")
            took_over = threading.Event()

            def on_leader(who: str | None, ev: threading.Event = took_over) -> None:
                if who == "b":
                    ev.set()

            follower.add_listener(on_leader)
            started = time.monotonic()
            if crash:
                leader.simulate_crash()  # type: ignore[attr-defined]
            else:
                leading.resign("a")
            took_over.wait(30)
            wait(follower.is_leader)
            samples.append(time.monotonic() - started)
            leader.close()
            follower.close()
    finally:
        successor.close()
    return samples


def kazoo_handover(hosts: str, rounds: int, crash: bool) -> list[float]:
    samples = []
    second = kazoo_client(hosts, SESSION)
    try:
        for round_ in range(rounds):
            path = f"/bench-kazoo-{uuid.uuid4().hex[:8]}/ho-{round_}"
            first = kazoo_client(hosts, SESSION)
            leading, release, took_over = threading.Event(), threading.Event(), threading.Event()
            a = first.Election(path, "a")
            hold = lambda on=leading, off=release: (on.set(), off.wait())  # noqa: E731
            threading.Thread(target=quietly, args=(a.run, hold), daemon=True).start()
            leading.wait(30)
            b = second.Election(path, "b")
            threading.Thread(target=b.run, args=(took_over.set,), daemon=True).start()

            def both_contend(el: Any = b) -> bool:  # a kazoo Election: kazoo is untyped
                return len(el.contenders()) == 2

            wait(both_contend)
            started = time.monotonic()
            if crash:
                crash_kazoo(first)
            else:
                release.set()
            took_over.wait(30)
            samples.append(time.monotonic() - started)
            release.set()
            first.stop()
            first.close()
    finally:
        second.stop()
        second.close()
    return samples


def our_listener_latency(url: str, count: int) -> list[float]:
    with kubecoord.connect(url) as writer_coord, kubecoord.connect(url) as reader_coord:
        kv = writer_coord.storage("lat")
        kv.put("k", "0")
        heard: dict[str, float] = {}

        def hear(value: str | None) -> None:
            heard.setdefault(value or "", time.monotonic())

        reader_coord.listener_registry("lat").add_value_change_listener("k", hear)
        samples = []
        for index in range(1, count + 1):

            def arrived(i: int = index) -> bool:
                return str(i) in heard

            started = time.monotonic()
            kv.update("k", str(index))
            wait(arrived)
            samples.append(heard[str(index)] - started)
        return samples


def kazoo_listener_latency(hosts: str, count: int) -> list[float]:
    writer, reader = kazoo_client(hosts), kazoo_client(hosts)
    path = f"/bench-kazoo-{uuid.uuid4().hex[:8]}/k"
    writer.create(path, b"0", makepath=True)
    heard: dict[bytes, float] = {}
    reader.DataWatch(path, lambda data, stat: heard.setdefault(data or b"", time.monotonic()))
    samples = []
    for index in range(1, count + 1):

        def arrived(i: int = index) -> bool:
            return str(i).encode() in heard

        started = time.monotonic()
        writer.set(path, str(index).encode())
        wait(arrived)
        samples.append(heard[str(index).encode()] - started)
    for client in (writer, reader):
        client.stop()
        client.close()
    return samples


def rate(operation: Callable[[int], object], count: int) -> float:
    started = time.monotonic()
    for index in range(count):
        operation(index)
    return count / (time.monotonic() - started)


def ops(url: str, hosts: str, count: int) -> None:
    with kubecoord.connect(url) as coord:
        kv = coord.storage("ops")
        rate(lambda i: kv.put(f"warm/{i}", "v"), 300)  # JIT-warm the server before either side counts
        ours = {
            "put": rate(lambda i: kv.put(f"k{i}", "v"), count),
            "update": rate(lambda i: kv.update(f"k{i}", "w"), count),
            "fetch": rate(lambda i: kv.fetch(f"k{i}").result(), count),
        }
    client = kazoo_client(hosts)
    base = f"/bench-kazoo-{uuid.uuid4().hex[:8]}"
    client.ensure_path(base)
    theirs = {
        "put": rate(lambda i: client.create(f"{base}/k{i}", b"v"), count),
        "update": rate(lambda i: client.set(f"{base}/k{i}", b"w"), count),
        "fetch": rate(lambda i: client.get(f"{base}/k{i}"), count),
    }
    client.stop()
    client.close()
    for name in ours:
        print(
            f"{name + ' ops/s (1 thread)':<34} ours {ours[name]:8.0f}  | kazoo {theirs[name]:8.0f}"
            f" | ratio {ours[name] / theirs[name]:.2f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="handover rounds")
    parser.add_argument("--crashes", type=int, default=5, help="crash failover rounds (each ~2 s)")
    parser.add_argument("--ops", type=int, default=2000, help="operations per ops/s figure")
    args = parser.parse_args()
    # The crash rounds kill clients on purpose: kazoo's reconnect warnings are expected noise.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    logging.getLogger("kubecoord.zookeeper.kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer.standalone(Path(tmp)) as server:
        url = f"zookeeper://{server.hosts}/bench-{uuid.uuid4().hex[:8]}"
        print(f"ZooKeeper 3.8 standalone on {server.hosts}; session {SESSION} s for failover", flush=True)
        line(
            "handover (resign -> next leads)",
            our_handover(url, args.rounds, False),
            kazoo_handover(server.hosts, args.rounds, False),
        )
        line(
            "crash failover (2 s session)",
            our_handover(url, args.crashes, True),
            kazoo_handover(server.hosts, args.crashes, True),
        )
        line(
            "listener latency (update -> call)",
            our_listener_latency(url, args.rounds * 5),
            kazoo_listener_latency(server.hosts, args.rounds * 5),
        )
        ops(url, server.hosts, args.ops)


if __name__ == "__main__":
    main()
