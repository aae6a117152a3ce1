"""A candidate in its own process, for kill -9 tests.

    python -m tests.backends.zookeeper.candidate_process URL SERVICE ID SESSION_TIMEOUT HISTORY

Appends its coordination event log (JSON Lines) to HISTORY, prints "ready" once
nominated, and runs until killed.
"""

from __future__ import annotations

import sys
import threading

import kubecoord


def main() -> None:
    url, service, candidate, session_timeout, history = sys.argv[1:6]
    coord = kubecoord.connect(url, lease_duration=float(session_timeout), history=history)
    coord.leader_election(service).nominate(candidate)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
