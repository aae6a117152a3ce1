"""A process of the embedded demo: one election candidate or one group member.

    python -m kubecoord_testkit.demos.worker candidate billing pod-a NAMESPACE KUBECONFIG
    python -m kubecoord_testkit.demos.worker member workers w1 NAMESPACE KUBECONFIG [READY_FILE]

It binds by name — no timing constants here: the LeaderElection ``billing`` and the Group
``workers`` say how long leases last. SIGTERM closes the coordinator (a leader resigns, a
member leaves); kill -9 leaves its Lease to expire, as a crashed pod would. READY_FILE, if
given, is created once the candidate has nominated or the member has joined: the demo
counts its deadlines from then, not from the process start (slow on a loaded machine).
"""

from __future__ import annotations

import os
import pathlib
import signal
import sys
import threading
import time

import kubecoord


def _say(who: str, text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]   {who}: {text}", flush=True)


def main(argv: list[str]) -> int:
    role, name, identity, namespace, kubeconfig, *ready = argv
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with kubecoord.connect(f"kubernetes://{namespace}", kubeconfig=kubeconfig) as coordinator:
        if role == "candidate":
            election = coordinator.leader_election(name)

            def on_leader(leader: str | None) -> None:
                if leader == identity:
                    current = election.get_leader()
                    _say(identity, f"I lead {name} now (epoch {current.epoch if current else '?'})")

            election.add_listener(on_leader)
            election.nominate(identity, data=f"pid={os.getpid()}")
            _say(identity, f"candidate in {name} (pid {os.getpid()})")
        else:
            coordinator.group_membership(name).join(identity, data=f"pid={os.getpid()}")
            _say(identity, f"joined {name} (pid {os.getpid()})")
        for path in ready:
            pathlib.Path(path).touch()
        stop.wait()
        _say(identity, "SIGTERM: closing (resign / leave)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
