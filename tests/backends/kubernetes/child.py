"""A kubecoord client in its own process, driven by the multi-process tests and the benchmark.

    python child.py elect KUBECONFIG SERVICE ID HISTORY      run for election until killed
    python child.py write KUBECONFIG STORE ID COUNT          CAS-increment "counter" and
                                                             update "own/ID", COUNT times each
    python child.py listen KUBECONFIG STORE KEY              print every value of KEY
    python child.py interrupted KUBECONFIG SERVICE ID        after a line on stdin, nominate ID;
                                                             SIGUSR1 raises in the main thread
                                                             (a user's signal handler), printed
                                                             "interrupted"; after another line,
                                                             nominate ID again, print what it did
    python child.py handles KUBECONFIG PREFIX COUNT EVERY    COUNT election handles PREFIX-I,
                                                             a candidate in every EVERY-th; print
                                                             "ready" with the process's threads
                                                             and RSS, "settled" 12 s later, and
                                                             every leader change

    python child.py units KUBECONFIG GROUP ID COUNT          a group coordinator member over COUNT
                                                             units (two assignors); print "stable"
                                                             with its generation and unit count
                                                             on every new stable generation

Prints one JSON object per line on stdout, flushed at once: {"t": wall seconds, "event":
..., ...}. ``elect`` reports "leader" (listener calls) and "is_leader" (every change of
is_leader(), polled every 2 ms) so a test can see what the process believed and when.
Timings: lease 2 s, renew deadline 1.5 s, retry 0.5 s (or $KUBECOORD_TIMINGS="l,d,r");
the URL is $KUBECOORD_URL (default kubernetes://default). On SIGTERM ``elect`` closes its
coordinator (which releases the Lease), prints "closed" and exits 0, as a pod should.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

import kubecoord

_print_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"t": time.time(), "event": event, **fields})
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def coordinator(kubeconfig: str, **options: Any) -> kubecoord.Coordinator:
    lease, deadline, retry = (float(x) for x in os.environ.get("KUBECOORD_TIMINGS", "2,1.5,0.5").split(","))
    url = os.environ.get("KUBECOORD_URL", "kubernetes://default")
    return kubecoord.connect(
        url, kubeconfig=kubeconfig, lease_duration=lease, renew_deadline=deadline, retry_period=retry, **options,
    )


def elect(kubeconfig: str, service: str, ident: str, history: str) -> None:
    coord = coordinator(kubeconfig, history=history)
    election = coord.leader_election(service)

    stopping = threading.Event()
    # The handler only flags: closing from inside it could interrupt a call holding a lock.
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    election.add_listener(lambda leader: emit("leader", value=leader))
    emit("nominated", won=election.nominate(ident))
    leading = None
    while not stopping.is_set():
        now = election.is_leader()
        if now != leading:
            leading = now
            leader = election.get_leader() if now else None
            emit("is_leader", value=now, epoch=leader.epoch if leader else None)
        time.sleep(0.002)
    # The application stops acting as leader first, then close() releases the Lease.
    if leading:
        emit("is_leader", value=False, epoch=None)
    emit("closing")
    coord.close()
    emit("closed")


class Interrupted(BaseException):
    """What the SIGUSR1 handler of ``interrupted`` raises (as a shutdown handler's SystemExit would)."""


def interrupted(kubeconfig: str, service: str, ident: str) -> None:
    coord = coordinator(kubeconfig)
    election = coord.leader_election(service)
    election.get_leader()  # the watch is up: nominate's first request is its write

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted()

    signal.signal(signal.SIGUSR1, interrupt)
    emit("ready")
    sys.stdin.readline()
    try:
        emit("nominated", won=election.nominate(ident))
    except Interrupted:
        emit("interrupted")
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    sys.stdin.readline()
    try:
        emit("nominated", won=election.nominate(ident))
    except Exception as exc:
        emit("failed", error=type(exc).__name__, message=str(exc))
        return
    deadline = time.monotonic() + 60
    while not election.is_leader(ident) and time.monotonic() < deadline:
        time.sleep(0.01)
    emit("leads", value=election.is_leader(ident))
    coord.close()


def write(kubeconfig: str, store: str, ident: str, count: int) -> None:
    kv = coordinator(kubeconfig).storage(store)
    own = f"own/{ident}"
    kv.put(own, "0")
    conflicts = 0
    for round_ in range(1, count + 1):
        while True:
            current = kv.fetch_versioned("counter").result()
            assert current is not None
            try:
                kv.update("counter", str(int(current.value) + 1), expected_version=current.version)
                break
            except kubecoord.VersionConflictError:
                conflicts += 1
        kv.update(own, str(round_))  # another key of the same ConfigMap: never a conflict
    emit("done", conflicts=conflicts)


def listen(kubeconfig: str, store: str, key: str) -> None:
    registry = coordinator(kubeconfig).listener_registry(store)
    registry.add_value_change_listener(key, lambda value: emit("value", value=value))
    emit("ready")
    threading.Event().wait()


def threads_and_rss() -> tuple[int, float]:
    """Every thread of this process (from /proc: Python's and any other), and its RSS in MiB."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return int(fields["Threads"]), int(fields["VmRSS"].split()[0]) / 1024


def handles(kubeconfig: str, prefix: str, count: int, every: int) -> None:
    """One client holding ``count`` election handles in the default (per-object) watch scope."""
    coord = coordinator(kubeconfig)
    elections = [coord.leader_election(f"{prefix}-{i}") for i in range(count)]
    for i, election in enumerate(elections):
        election.add_listener(lambda leader, i=i: emit("leader", index=i, value=leader))
        if every and i % every == 0:
            election.nominate(f"child-{i}")
        else:
            election.get_leader()
    time.sleep(1.0)  # let every watch open
    threads, rss = threads_and_rss()
    emit("ready", threads=threads, rss_mib=rss, names=sorted(t.name for t in threading.enumerate()))
    # The lease loops' workers grow while steps are overdue (the start-up burst on a loaded
    # machine) and the extra ones end after 10 s idle: the steady state comes after that.
    time.sleep(12.0)
    threads, rss = threads_and_rss()
    emit("settled", threads=threads, rss_mib=rss, names=sorted(t.name for t in threading.enumerate()))
    threading.Event().wait()


def units(kubeconfig: str, group: str, ident: str, count: int) -> None:
    from kubecoord.group_coordinator import UnitsProtocol, decode_units

    coord = coordinator(kubeconfig)
    names = [f"p{index}" for index in range(count)]
    member = coord.group_coordinator(group, UnitsProtocol(names, assignors=("sticky", "range")), member_id=ident,
                                     session_timeout=2.0, rebalance_timeout=4.0)
    member.join()
    seen = -1
    while True:
        assignment = member.assignment
        if member.is_stable() and member.generation != seen and assignment is not None:
            seen = member.generation
            emit("stable", generation=seen, units=len(decode_units(assignment, names)[0]))
        time.sleep(0.05)


def main(argv: list[str]) -> None:
    mode, kubeconfig, *rest = argv
    if mode == "elect":
        elect(kubeconfig, *rest)
    elif mode == "write":
        write(kubeconfig, rest[0], rest[1], int(rest[2]))
    elif mode == "listen":
        listen(kubeconfig, *rest)
    elif mode == "handles":
        handles(kubeconfig, rest[0], int(rest[1]), int(rest[2]))
    elif mode == "units":
        try:
            units(kubeconfig, rest[0], rest[1], int(rest[2]))
        except Exception as exc:  # stderr is not collected: say why on stdout
            emit("error", error=repr(exc))
            raise
    elif mode == "interrupted":
        interrupted(kubeconfig, *rest)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
