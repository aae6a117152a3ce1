"""One soak client process: ``python -m kubecoord_testkit.soak.worker ROLE ...``.

Roles:

- ``candidate``: nominates itself in one election and stays; while leading it resigns
  after a random 4-12 s (a handover) and nominates itself again a moment later;
- ``member``: a member of one group coordinator (KIP-795: generations, a leader-computed
  assignment of UNITS units); now and then leaves and joins again;
- ``writer``: read-modify-write increments of a few shared counters by compare-and-set
  (fetch_versioned, then update with expected_version, or put when absent), retrying on
  conflicts: the pipeline checks that no acknowledged write is lost;
- ``locker``: takes one lock (coord.lock) with short timeouts, holds it 0.5-3 s checking
  is_held() every 50 ms, releases, pauses: the pipeline checks that no two holds overlap
  (on the lock's election record) and that tokens never go back.

Every process writes its own event log (kubecoord.history) to ``--history``. SIGTERM
closes the coordinator (resign, leave) and exits 0; kill -9 and SIGSTOP are the faults.
SIGABRT writes every thread's stack to stderr before the process dies (faulthandler): the
pool sends it to a process that has not exited 30 s after SIGTERM, so its stderr says
where it hung.

``--clock-offset SECONDS`` shifts this process's wall clock (time.time, hence every
timestamp of its log and every valid_until it reports) as a skewed host's clock would
be; monotonic time, which the library uses for its own deadlines, is untouched. SIGUSR1
moves the offset to the next value of ``--clock-jumps`` (a clock stepped by NTP).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

T = TypeVar("T")
UNITS = 12
"""Units the soak's group coordinator members share."""

_real_time = time.time
_offset = [0.0]


def _skewed_time() -> float:
    return _real_time() + _offset[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubecoord_testkit.soak.worker")
    parser.add_argument("role", choices=["candidate", "member", "writer", "locker"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--id", required=True)
    parser.add_argument("--name", required=True, help="election, group or store name")
    parser.add_argument("--history", required=True)
    parser.add_argument("--options", default="{}", help="JSON: keyword options of kubecoord.connect")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clock-offset", type=float, default=0.0)
    parser.add_argument("--clock-jumps", default="", help="comma-separated offsets SIGUSR1 steps through")
    parser.add_argument("--keys", type=int, default=3, help="writer: counters shared by the writers")
    parser.add_argument("--session", type=float, default=8.0, help="member: the group coordinator's session timeout")
    args = parser.parse_args(argv)

    # Before kubecoord is imported, so that every wall-clock reading of the library sees it.
    _offset[0] = args.clock_offset
    time.time = _skewed_time
    jumps = [float(value) for value in args.clock_jumps.split(",") if value]

    def jump(signum: int, frame: FrameType | None) -> None:
        if jumps:
            _offset[0] = jumps.pop(0)

    faulthandler.enable(all_threads=True)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stopping.set())
    signal.signal(signal.SIGUSR1, jump)

    import kubecoord
    from kubecoord.errors import CoordinationError

    rng = random.Random(f"{args.seed}:{args.id}")
    options = json.loads(args.options)
    coord = None
    while coord is None and not stopping.is_set():
        try:
            coord = kubecoord.connect(args.url, history=args.history, **options)
        except CoordinationError as exc:  # the server may be down for a restart: try again
            print(f"{args.id}: connect failed: {exc}", file=sys.stderr, flush=True)
            stopping.wait(1.0)
    if coord is None:
        return 0
    print(f"{args.id}: ready", flush=True)
    try:
        if args.role == "candidate":
            _candidate(coord, args, rng, stopping)
        elif args.role == "member":
            _member(coord, args, rng, stopping)
        elif args.role == "locker":
            _locker(coord, args, rng, stopping)
        else:
            _writer(coord, args, rng, stopping)
    finally:
        coord.close()
    return 0


def _opened(make: Callable[[], T], args: argparse.Namespace, stopping: threading.Event) -> T | None:
    """A handle, retried while the server is down: binding it reads its resource (a 5xx or a
    reset while an API server restarts is BackendUnavailableError), as an application retries."""
    from kubecoord.errors import CoordinationError

    while not stopping.is_set():
        try:
            return make()
        except CoordinationError as exc:
            print(f"{args.id}: opening the handle failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            stopping.wait(1.0)
    return None


def _locker(coord: object, args: argparse.Namespace, rng: random.Random, stopping: threading.Event) -> None:
    from kubecoord.api import Coordinator
    from kubecoord.errors import CoordinationError

    assert isinstance(coord, Coordinator)
    lock = coord.lock(args.name, id=args.id)
    while not stopping.is_set():
        try:
            if not lock.acquire(timeout=2, cancel=stopping):
                continue
            hold_until = time.monotonic() + rng.uniform(0.5, 3)
            while time.monotonic() < hold_until and lock.is_held() and not stopping.wait(0.05):
                pass
            if lock.is_held():
                lock.release()
        except CoordinationError as exc:
            print(f"{args.id}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        stopping.wait(rng.uniform(0.1, 1))


def _candidate(coord: object, args: argparse.Namespace, rng: random.Random, stopping: threading.Event) -> None:
    from kubecoord.api import Coordinator
    from kubecoord.errors import CoordinationError

    assert isinstance(coord, Coordinator)
    election = _opened(lambda: coord.leader_election(args.name), args, stopping)
    if election is None:
        return
    nominated = False
    lead_until: float | None = None
    while not stopping.is_set():
        try:
            if not nominated:
                election.nominate(args.id)
                nominated = True
            if election.is_leader(args.id):
                now = time.monotonic()
                lead_until = lead_until or now + rng.uniform(4, 12)
                if now >= lead_until:
                    election.resign(args.id)
                    nominated, lead_until = False, None
                    stopping.wait(rng.uniform(0.5, 2))
                    continue
            else:
                lead_until = None
        except CoordinationError as exc:
            print(f"{args.id}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        stopping.wait(0.2)


def _member(coord: object, args: argparse.Namespace, rng: random.Random, stopping: threading.Event) -> None:
    """A member of the group coordinator (KIP-795) sharing UNITS units: its rebalance events
    (assigned, revoked) let the pipeline check that no unit is owned twice and that no
    member works on a stale generation. Now and then it leaves and joins again with a new
    handle; one expelled by a fault (its session expired) joins again by itself."""
    from kubecoord.api import Coordinator, GroupCoordinatorHandle
    from kubecoord.errors import CoordinationError
    from kubecoord.group_coordinator import UnitsProtocol

    assert isinstance(coord, Coordinator)
    units = [f"u{index}" for index in range(UNITS)]
    member: GroupCoordinatorHandle | None = None
    joined = leaving = False
    next_change = 0.0
    while not stopping.is_set():
        try:
            if member is None:
                member = _opened(
                    lambda: coord.group_coordinator(
                        args.name, UnitsProtocol(units), member_id=args.id, session_timeout=args.session,
                        rebalance_timeout=2 * args.session,
                    ),
                    args, stopping,
                )
                if member is None:
                    return
            if leaving or (joined and time.monotonic() >= next_change):
                leaving = True
                member.leave()  # raises while the server does not answer: still a member, so again
                member.close()
                member, joined, leaving = None, False, False
                stopping.wait(rng.uniform(0.5, 2))
                continue
            if not joined:
                leaving = True  # a join that fails half-way is undone before the next one
                member.join()
                joined, leaving = True, False
                next_change = time.monotonic() + rng.uniform(8, 20)
        except CoordinationError as exc:
            print(f"{args.id}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        stopping.wait(0.5)


def _writer(coord: object, args: argparse.Namespace, rng: random.Random, stopping: threading.Event) -> None:
    from kubecoord.api import Coordinator
    from kubecoord.errors import (
        CoordinationError,
        KeyExistsError,
        KeyNotFoundError,
        VersionConflictError,
    )

    assert isinstance(coord, Coordinator)
    storage = _opened(lambda: coord.storage(args.name), args, stopping)
    if storage is None:
        return
    while not stopping.is_set():
        key = f"counters/c{rng.randrange(args.keys)}"
        try:
            current = storage.fetch_versioned(key).result(30)
            if current is None:
                storage.put(key, "1")
            else:
                storage.update(key, str(int(current.value) + 1), expected_version=current.version)
        except (VersionConflictError, KeyExistsError, KeyNotFoundError):
            pass  # another writer won, or the store was deleted: read again
        except (CoordinationError, TimeoutError) as exc:
            print(f"{args.id}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        stopping.wait(rng.uniform(0.1, 0.4))


if __name__ == "__main__":
    sys.exit(main())
