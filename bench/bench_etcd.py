"""etcd:// beside etcd's own recipes on one etcd member: election handover after a
resign, failover after kill -9, lock handover, kubecoord <-> kubecoord and kubecoord <->
`etcdctl elect` / `etcdctl lock` (concurrency.Election, concurrency.Mutex). The etcd is the
testkit's (kubecoord-etcd, which ``make etcd`` builds, or $ETCD_BIN); its release is printed.

    python bench/bench_etcd.py [--rounds 10]

Handover: the waiter is queued, the holder resigns or releases (kubecoord: resign() /
release(); etcdctl: SIGINT, on which it resigns or unlocks), and the time until the waiter
leads or holds is measured (etcdctl's side: until it prints the key it won). Failover: the
leader's process is killed with -9 and the time until the other side leads is measured;
it is bounded below by the killed side's lease TTL (kubecoord here: lease_duration 3 s;
etcdctl elect's session is 60 s, and that is what it takes). Prints the load beside the
figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import kubecoord
from kubecoord_testkit import processes
from kubecoord_testkit.servers.etcd import EtcdCluster, etcd_binary, etcdctl_binary, release
from measure import load, ms

TIMINGS: dict[str, Any] = {"lease_duration": 3, "renew_deadline": 1.5, "retry_period": 0.3}
CANDIDATE = """
import sys, threading, kubecoord
coord = kubecoord.connect(sys.argv[1], lease_duration=3, renew_deadline=1.5, retry_period=0.3)
election = coord.leader_election(sys.argv[2])
election.nominate("killed")
while not election.is_leader("killed"):
    threading.Event().wait(0.01)
print("leading", flush=True)
threading.Event().wait()
"""


def _wait(predicate: Any, timeout: float = 120.0) -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the waiter never took over")
        time.sleep(0.001)
    return time.monotonic()


def _etcdctl(etcd: EtcdCluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(etcdctl_binary()), f"--endpoints={etcd.endpoints}", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _first_line(process: subprocess.Popen[str]) -> float:
    assert process.stdout is not None
    process.stdout.readline()
    return time.monotonic()


def kubecoord_to_kubecoord(url: str, rounds: int) -> list[float]:
    samples = []
    with kubecoord.connect(url, **TIMINGS) as first, kubecoord.connect(url, **TIMINGS) as second:
        for _ in range(rounds):
            name = f"b-{uuid.uuid4().hex[:8]}"
            holder, waiter = first.leader_election(name), second.leader_election(name)
            holder.nominate("a")
            waiter.nominate("b")
            began = time.monotonic()
            holder.resign("a")
            samples.append(_wait(lambda w=waiter: w.is_leader("b")) - began)
            holder.close()
            waiter.close()
    return samples


def kubecoord_to_etcdctl(url: str, etcd: EtcdCluster, rounds: int, kind: str) -> list[float]:
    samples = []
    with kubecoord.connect(url, **TIMINGS) as coord:
        for _ in range(rounds):
            name = f"b-{uuid.uuid4().hex[:8]}"
            if kind == "elect":
                election = coord.leader_election(name)
                election.nominate("a")
                peer = _etcdctl(etcd, "elect", name, "peer")
                time.sleep(0.3)  # queued behind kubecoord
                began = time.monotonic()
                election.resign("a")
            else:
                lock = coord.lock(name)
                lock.acquire()
                peer = _etcdctl(etcd, "lock", "--ttl", "3", name)
                time.sleep(0.3)
                began = time.monotonic()
                lock.release()
            samples.append(_first_line(peer) - began)
            processes.stop(peer, 5.0, signum=signal.SIGINT)
    return samples


def etcdctl_to_kubecoord(url: str, etcd: EtcdCluster, rounds: int, kind: str) -> list[float]:
    samples = []
    with kubecoord.connect(url, **TIMINGS) as coord:
        for _ in range(rounds):
            name = f"b-{uuid.uuid4().hex[:8]}"
            peer = _etcdctl(etcd, *(("elect", name, "peer") if kind == "elect" else ("lock", "--ttl", "3", name)))
            _first_line(peer)  # etcdctl leads / holds
            if kind == "elect":
                election = coord.leader_election(name)
                election.nominate("b")
                began = time.monotonic()
                peer.send_signal(signal.SIGINT)  # etcdctl resigns on interrupt
                samples.append(_wait(lambda e=election: e.is_leader("b")) - began)
                election.close()
            else:
                lock = coord.lock(name)
                began = 0.0

                def interrupt(p: subprocess.Popen[str] = peer) -> None:
                    nonlocal began
                    time.sleep(0.3)
                    began = time.monotonic()
                    p.send_signal(signal.SIGINT)

                threading.Thread(target=interrupt).start()
                lock.acquire()
                samples.append(time.monotonic() - began)
                lock.release()
            peer.wait(10)
    return samples


def failover_after_kill(url: str, etcd: EtcdCluster, rounds: int, successor: str) -> list[float]:
    samples = []
    for _ in range(rounds):
        name = f"f-{uuid.uuid4().hex[:8]}"
        killed = subprocess.Popen([sys.executable, "-c", CANDIDATE, url, name], stdout=subprocess.PIPE, text=True)
        _first_line(killed)
        if successor == "kubecoord":
            with kubecoord.connect(url, **TIMINGS) as coord:
                election = coord.leader_election(name)
                election.nominate("b")
                began = time.monotonic()
                processes.stop(killed, 0.0, signum=signal.SIGKILL)
                samples.append(_wait(lambda e=election: e.is_leader("b")) - began)
        else:
            peer = _etcdctl(etcd, "elect", name, "peer")
            time.sleep(0.3)
            began = time.monotonic()
            processes.stop(killed, 0.0, signum=signal.SIGKILL)
            samples.append(_first_line(peer) - began)
            processes.stop(peer, 5.0, signum=signal.SIGINT)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root, EtcdCluster.single(Path(root)) as etcd:
        url = f"etcd://{etcd.hosts}"
        print(f"etcd {release(etcd_binary())}, one member; {load()}")
        print(f"election handover, kubecoord -> kubecoord (resign):    {ms(kubecoord_to_kubecoord(url, args.rounds))}")
        print(f"election handover, kubecoord -> etcdctl elect (resign): "
              f"{ms(kubecoord_to_etcdctl(url, etcd, args.rounds, 'elect'))}")
        print(f"election handover, etcdctl elect -> kubecoord (SIGINT): "
              f"{ms(etcdctl_to_kubecoord(url, etcd, args.rounds, 'elect'))}")
        print(f"lock handover, kubecoord -> etcdctl lock (release):     "
              f"{ms(kubecoord_to_etcdctl(url, etcd, args.rounds, 'lock'))}")
        print(f"lock handover, etcdctl lock -> kubecoord (SIGINT):      "
              f"{ms(etcdctl_to_kubecoord(url, etcd, args.rounds, 'lock'))}")
        failovers = max(1, args.rounds // 3)
        print(f"failover after kill -9 (lease 3 s), -> kubecoord:       "
              f"{ms(failover_after_kill(url, etcd, failovers, 'kubecoord'))}")
        print(f"failover after kill -9 (lease 3 s), -> etcdctl elect:   "
              f"{ms(failover_after_kill(url, etcd, failovers, 'etcdctl'))}")
        print(f"{load()}")


if __name__ == "__main__":
    main()
