"""A kubecoord candidate in its own process, for kill -9, SIGTERM and interop tests.

    python -m tests.backends.cassandra.candidate_process URL SERVICE ID HISTORY

Appends its coordination event log (JSON Lines) to HISTORY, prints "ready" once
nominated, and runs until killed; SIGTERM closes the coordinator (a resign) and exits.
"""

from __future__ import annotations

import signal
import sys
import threading

import kubecoord
from kubecoord.cli.logs import configure

from .timings import TIMINGS


def main() -> None:
    url, service, candidate, history = sys.argv[1:5]
    configure("INFO")  # to its .stderr file: why a renewal failed, when a test fails
    coord = kubecoord.connect(url, history=history, **TIMINGS)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    coord.leader_election(service).nominate(candidate)
    print("ready", flush=True)
    stop.wait()
    coord.close()


if __name__ == "__main__":
    main()
