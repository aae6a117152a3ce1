"""Locks: uncontended acquire+release latency and handoff (release -> the waiter holds), kubecoord vs kazoo.

    python bench/bench_locks.py [--rounds 50]

In one run, on one ZooKeeper 3.8 server: kubecoord's lock (zookeeper://) beside kazoo's own
Lock recipe on the same server (same node layout: the two interoperate); then kubecoord's
lock on the real kube-apiserver (one Lease per lock; skipped without the binaries) and on
memory://. Handoff: a waiter is queued in another coordinator (another client), the holder
releases, and the time until the waiter's acquire() returns is measured. Prints the load
beside the figures: the machine is shared.
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

from kazoo.client import KazooClient

import kubecoord
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from measure import load, ms
from real_server import real_server

Factory = Callable[[str], Any]
"""name -> an object with acquire() and release() (a kubecoord Lock or a kazoo Lock)."""


def uncontended(make: Factory, rounds: int) -> list[float]:
    lock = make(f"u-{uuid.uuid4().hex[:8]}")
    samples = []
    for _ in range(rounds):
        began = time.perf_counter()
        lock.acquire()
        lock.release()
        samples.append(time.perf_counter() - began)
    return samples


def handoff(holder_make: Factory, waiter_make: Factory, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        name = f"h-{uuid.uuid4().hex[:8]}"
        holder, waiter = holder_make(name), waiter_make(name)
        holder.acquire()
        got = threading.Event()
        acquired_at: list[float] = []

        def wait(lock: Any = waiter, acquired_at: list[float] = acquired_at, got: threading.Event = got) -> None:
            lock.acquire()
            acquired_at.append(time.perf_counter())
            got.set()

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.2)  # queued
        released_at = time.perf_counter()
        holder.release()
        got.wait(30)
        thread.join()
        samples.append(acquired_at[0] - released_at)
        waiter.release()
    return samples


def report(label: str, make: Factory, other: Factory, rounds: int) -> None:
    print(f"{label:44} acquire+release {ms(uncontended(make, rounds))}", flush=True)
    print(f"{'':44} handoff         {ms(handoff(make, other, max(10, rounds // 3)))}  [{load()}]", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer.standalone(Path(tmp)) as server:
        chroot = f"bench-{uuid.uuid4().hex[:8]}"
        url = f"zookeeper://{server.hosts}/{chroot}"
        with kubecoord.connect(url) as first, kubecoord.connect(url) as second:
            report("kubecoord lock, zookeeper://", first.lock, second.lock, args.rounds)
        clients = [KazooClient(hosts=server.hosts), KazooClient(hosts=server.hosts)]
        for client in clients:
            client.start(timeout=10)
        try:
            report(
                "kazoo Lock, same server",
                lambda name: clients[0].Lock(f"/{chroot}/elections/{name}"),
                lambda name: clients[1].Lock(f"/{chroot}/elections/{name}"),
                args.rounds,
            )
        finally:
            for client in clients:
                client.stop()
                client.close()
    with real_server() as api:
        if api is None:
            print("kubecoord lock, kubernetes://: skipped (no kube-apiserver binaries)")
        else:
            options = {"kubeconfig": str(api.admin_kubeconfig)}
            with kubecoord.connect("kubernetes://default", **options) as first, \
                    kubecoord.connect("kubernetes://default", **options) as second:
                report("kubecoord lock, real kube-apiserver (Lease)", first.lock, second.lock, args.rounds)
    name = f"memory://bench-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(name) as first, kubecoord.connect(name) as second:
        report("kubecoord lock, memory://", first.lock, second.lock, args.rounds)


if __name__ == "__main__":
    main()
