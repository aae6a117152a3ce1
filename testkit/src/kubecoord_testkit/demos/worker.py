"""A process of the embedded demo: one election candidate or one group member.

    python -m kubecoord_testkit.demos.worker candidate billing pod-a NAMESPACE KUBECONFIG
    python -m kubecoord_testkit.demos.worker member workers w1 NAMESPACE KUBECONFIG

It binds by name — no timing constants here: the LeaderElection ``billing`` and the Group
``workers`` say how long leases last. SIGTERM closes the coordinator (a leader resigns, a
member leaves); kill -9 leaves its Lease to expire, as a crashed pod would.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import kubecoord


def _say(who: str, text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]   {who}: {text}", flush=True)


def main(argv: list[str]) -> int:
    role, name, identity, namespace, kubeconfig = argv
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
        stop.wait()
        _say(identity, "SIGTERM: closing (resign / leave)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
