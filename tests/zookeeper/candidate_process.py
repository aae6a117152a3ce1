"""A candidate in its own process, for kill -9 tests.

    python -m tests.zookeeper.candidate_process URL SERVICE ID SESSION_TIMEOUT

Prints one JSON line per leadership event of this candidate (the coordination event log
on stdout) and "ready" once nominated; runs until killed.
"""

from __future__ import annotations

import sys
import threading

import kubecoord


def main() -> None:
    url, service, candidate, session_timeout = sys.argv[1:5]
    coord = kubecoord.connect(url, session_timeout=float(session_timeout), history=sys.stdout)
    coord.leader_election(service).nominate(candidate)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
