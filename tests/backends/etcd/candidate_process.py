"""A kubecoord election candidate or lock holder in its own process, for kill -9 tests.

    python -m tests.backends.etcd.candidate_process URL elect|lock NAME ID

Prints "leading EPOCH" or "holding TOKEN" once it leads or holds, and runs until killed.
"""

from __future__ import annotations

import sys
import threading

import kubecoord

from .timings import TIMINGS


def main() -> None:
    url, kind, name, ident = sys.argv[1:5]
    coord = kubecoord.connect(url, **TIMINGS)
    if kind == "lock":
        lock = coord.lock(name, id=ident)
        lock.acquire()
        print(f"holding {lock.token}", flush=True)
    else:
        election = coord.leader_election(name)
        election.nominate(ident)
        while not election.is_leader(ident):
            threading.Event().wait(0.05)
        leader = election.get_leader()
        print(f"leading {leader.epoch if leader else -1}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
