"""Cassandra backend figures, side by side with a peer that does what the seed plugin did
(the KIP-30 Cassandra plugin: LWT INSERT IF NOT EXISTS, renew and poll every 500 ms, TTL 2 s,
plain writes to a kv table) on the same server, in the same run.

    .venv/bin/python bench/bench_cassandra.py [--rounds N] [--ops N]

Starts one Cassandra 5.0 node (the testkit's starter; ``make cassandra-jars`` first) and prints:

- handover: ours, resign() -> the next candidate leads; the seed has no resign: its leader
  stops -> the next seed peer leads (its row must expire first);
- crash failover, TTL 2 s: the leader stops without a word -> the next leads;
- listener latency: update() on one coordinator -> the value listener on another (ours polls a
  change marker every poll_period; the seed's peers poll the value every 500 ms);
- operations per second, one thread: put / update / fetch against the seed's INSERT / UPDATE /
  SELECT on its kv table, and requests per operation (statements sent per call).

Wall-clock figures on a shared machine are noisy: compare the ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cassandra.cluster import Cluster

import kubecoord
from kubecoord_testkit.servers.cassandra import CassandraServer
from measure import load, pct

KEYSPACE = "bench"
SEED_PERIOD = 0.5
FAST = {"lease_duration": 2, "renew_deadline": 0.75, "retry_period": 0.2, "poll_period": 0.1}
"""Our timings for the failover figure: the seed's TTL (2 s) and a 100 ms poll."""


def line(label: str, ours: list[float], theirs: list[float] | None = None) -> None:
    text = f"{label:<38} ours p50 {pct(ours, 50) * 1000:8.1f} ms  p99 {pct(ours, 99) * 1000:8.1f} ms"
    if theirs:
        text += f" | seed p50 {pct(theirs, 50) * 1000:8.1f} ms  p99 {pct(theirs, 99) * 1000:8.1f} ms"
        text += f" | ratio {pct(ours, 50) / pct(theirs, 50):.2f}"
    print(text, flush=True)


def wait(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not complete")
        time.sleep(0.001)


class SeedPeer:
    """The seed plugin's candidate loop, verbatim statements, on a thread of its own."""

    def __init__(self, session: Any, resource: str, owner: str) -> None:
        self._session, self._resource, self.owner = session, resource, owner
        self._insert = session.prepare(
            f"INSERT INTO {KEYSPACE}.leader_election (resource, owner, sup_data) VALUES (?, ?, ?) IF NOT EXISTS"
        )
        self._renew = session.prepare(
            f"UPDATE {KEYSPACE}.leader_election SET owner = ?, sup_data = ? WHERE resource = ? IF owner = ?"
        )
        self._poll = session.prepare(f"SELECT owner FROM {KEYSPACE}.leader_election WHERE resource = ?")
        self.leading = threading.Event()
        self.stopped = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            if self.leading.is_set():
                self._session.execute(self._renew, [self.owner, "", self._resource, self.owner])
            else:
                self._session.execute(self._insert, [self._resource, self.owner, ""])
            rows = list(self._session.execute(self._poll, [self._resource]))
            if rows and rows[0].owner == self.owner:
                self.leading.set()
            else:
                self.leading.clear()
            self.stopped.wait(SEED_PERIOD)


def our_handover(url: str, rounds: int, crash: bool) -> list[float]:
    samples = []
    options: dict[str, Any] = FAST if crash else {}  # connect() takes **options: Any
    successor = kubecoord.connect(url, **options)
    try:
        for _ in range(rounds):
            service = f"ho-{uuid.uuid4().hex[:8]}"
            leader = kubecoord.connect(url, **options)
            leading = leader.leader_election(service)
            assert leading.nominate("a")
            follower = successor.leader_election(service)
            follower.nominate("b")
            started = time.monotonic()
            if crash:
                leader.simulate_crash()  # type: ignore[attr-defined]
            else:
                leading.resign("a")
            wait(follower.is_leader)
            samples.append(time.monotonic() - started)
            leader.close()
            follower.close()
    finally:
        successor.close()
    return samples


def seed_handover(session: Any, rounds: int) -> list[float]:
    """The seed cannot resign: its leader just stops; the next peer leads once the row expired."""
    samples = []
    for _ in range(rounds):
        resource = f"seed-{uuid.uuid4().hex[:8]}"
        first = SeedPeer(session, resource, "a")
        wait(first.leading.is_set)
        second = SeedPeer(session, resource, "b")
        time.sleep(SEED_PERIOD)
        started = time.monotonic()
        first.stopped.set()
        wait(second.leading.is_set)
        samples.append(time.monotonic() - started)
        second.stopped.set()
    return samples


def our_listener_latency(url: str, count: int, poll: float) -> list[float]:
    with kubecoord.connect(url, poll_period=poll) as writer, kubecoord.connect(url, poll_period=poll) as reader:
        store = f"lat-{uuid.uuid4().hex[:8]}"
        kv = writer.storage(store)
        kv.put("k", "0")
        heard: dict[str, float] = {}

        def hear(value: str | None) -> None:
            heard.setdefault(value or "", time.monotonic())

        reader.listener_registry(store).add_value_change_listener("k", hear)
        samples = []
        for index in range(1, count + 1):

            def arrived(i: int = index) -> bool:
                return str(i) in heard

            started = time.monotonic()
            kv.update("k", str(index))
            wait(arrived)
            samples.append(heard[str(index)] - started)
        return samples


def seed_listener_latency(session: Any, count: int) -> list[float]:
    """A seed peer hears of a change by its next 500 ms poll of the value."""
    key = f"lat-{uuid.uuid4().hex[:8]}"
    write = session.prepare(f"UPDATE {KEYSPACE}.kv SET value = ? WHERE key = ?")
    read = session.prepare(f"SELECT value FROM {KEYSPACE}.kv WHERE key = ?")
    heard: dict[str, float] = {}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            rows = list(session.execute(read, [key]))
            if rows:
                heard.setdefault(rows[0].value, time.monotonic())
            stop.wait(SEED_PERIOD)

    threading.Thread(target=poll, daemon=True).start()
    samples = []
    for index in range(1, count + 1):

        def arrived(i: int = index) -> bool:
            return str(i) in heard

        started = time.monotonic()
        session.execute(write, [str(index), key])
        wait(arrived)
        samples.append(heard[str(index)] - started)
    stop.set()
    return samples


def rate(operation: Callable[[int], object], count: int) -> float:
    started = time.monotonic()
    for index in range(count):
        operation(index)
    return count / (time.monotonic() - started)


def ops(url: str, session: Any, count: int) -> None:
    with kubecoord.connect(url) as coord:
        store = f"ops-{uuid.uuid4().hex[:8]}"
        kv = coord.storage(store)
        sent = {"n": 0}
        inner = coord.session.session  # type: ignore[attr-defined]
        original = inner.execute

        def counting(*args: Any, **kwargs: Any) -> Any:
            sent["n"] += 1
            return original(*args, **kwargs)

        inner.execute = counting
        rate(lambda i: kv.put(f"warm/{i}", "v"), 100)
        ours, requests = {}, {}
        for name, operation in (
            ("put", lambda i: kv.put(f"k{i}", "v")),
            ("update", lambda i: kv.update(f"k{i}", "w")),
            ("fetch", lambda i: kv.fetch(f"k{i}").result()),
        ):
            before = sent["n"]
            ours[name] = rate(operation, count)
            requests[name] = (sent["n"] - before) / count
    insert = session.prepare(f"INSERT INTO {KEYSPACE}.kv (key, value) VALUES (?, ?)")
    update = session.prepare(f"UPDATE {KEYSPACE}.kv SET value = ? WHERE key = ?")
    select = session.prepare(f"SELECT value FROM {KEYSPACE}.kv WHERE key = ?")
    base = uuid.uuid4().hex[:8]
    theirs = {
        "put": rate(lambda i: session.execute(insert, [f"{base}/k{i}", "v"]), count),
        "update": rate(lambda i: session.execute(update, ["w", f"{base}/k{i}"]), count),
        "fetch": rate(lambda i: session.execute(select, [f"{base}/k{i}"]), count),
    }
    for name in ours:
        print(
            f"{name + ' ops/s (1 thread)':<38} ours {ours[name]:8.0f} ({requests[name]:.2f} requests/op)"
            f" | seed {theirs[name]:8.0f} (1.00 requests/op, no version, no CAS)"
            f" | ratio {ours[name] / theirs[name]:.2f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="handover rounds")
    parser.add_argument("--crashes", type=int, default=5, help="crash failover rounds (each ~2 s)")
    parser.add_argument("--ops", type=int, default=500, help="operations per ops/s figure")
    args = parser.parse_args()
    logging.getLogger("cassandra").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp, CassandraServer.single(Path(tmp)) as server:
        url = f"cassandra://{server.hosts}/{KEYSPACE}"
        kubecoord.connect(url).close()  # the schema (the seed's leader_election table among it)
        address, _, port = server.hosts.rpartition(":")
        cluster = Cluster([(address, int(port))], protocol_version=5)
        session = cluster.connect()
        session.execute(f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.kv (key text PRIMARY KEY, value text)")
        print(f"Cassandra 5.0 single node on {server.hosts}, ready in {server.started_in:.1f} s; {load()}",
              flush=True)
        line("handover (resign / stop -> next leads)", our_handover(url, args.rounds, False),
             seed_handover(session, args.rounds))
        line("crash failover (TTL 2 s)", our_handover(url, args.crashes, True), seed_handover(session, args.crashes))
        line("listener latency (poll 0.5 s)", our_listener_latency(url, args.rounds * 3, 0.5),
             seed_listener_latency(session, args.rounds * 3))
        line("listener latency (poll 0.1 s)", our_listener_latency(url, args.rounds * 3, 0.1))
        ops(url, session, args.ops)
        cluster.shutdown()
        print(load(), flush=True)


if __name__ == "__main__":
    main()
