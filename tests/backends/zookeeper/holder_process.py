"""A lock holder or election leader in its own process, reporting what it believes.

    python -m tests.backends.zookeeper.holder_process URL KIND NAME ID SESSION_TIMEOUT

KIND is ``lock`` (coord.lock(NAME).acquire()) or ``election`` (nominate, then wait to
lead). Prints ``connected`` once its session is up, then samples is_held() / is_leader()
every few milliseconds and prints, on time.monotonic() (one clock for every process of
the host):

    held BEFORE                the first sample that said it holds (taken after BEFORE)
    ended LAST_TRUE FIRST_FALSE  the first sample that said it does not; the one before
                               had said it holds (answered before LAST_TRUE)

A line ``quiet`` on its stdin makes it stop sampling and print ``quiet``: a test then
freezes it (SIGSTOP) with no sample under way, so no sample straddles the freeze. After
``go`` it samples again. After ``ended``, a line ``again`` makes it wait to hold again
(an election's candidate stays nominated through a suspension) and start over from
``held``. It runs until killed; log warnings go to stderr.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable

import kubecoord

SAMPLE_EVERY = 0.005


def main() -> None:
    url, kind, name, holder_id, session_timeout = sys.argv[1:6]
    quiet, go, again = threading.Event(), threading.Event(), threading.Event()

    def read_commands() -> None:
        for line in sys.stdin:
            if line.strip() == "quiet":
                go.clear()
                quiet.set()
            elif line.strip() == "go":
                quiet.clear()
                go.set()
            elif line.strip() == "again":
                again.set()

    threading.Thread(target=read_commands, daemon=True).start()
    logging.basicConfig(level=logging.WARNING)  # kubecoord's warnings to stderr
    coord = kubecoord.connect(url, lease_duration=float(session_timeout))
    print("connected", flush=True)
    holds: Callable[[], bool]
    if kind == "lock":
        lock = coord.lock(name, id=holder_id)
        lock.acquire()
        holds = lock.is_held
    else:
        election = coord.leader_election(name)
        election.nominate(holder_id)

        def holds() -> bool:
            return election.is_leader(holder_id)

    while True:
        sample(holds, quiet, go)
        again.wait()
        again.clear()


def sample(holds: Callable[[], bool], quiet: threading.Event, go: threading.Event) -> None:
    """Wait until it holds, then sample until it does not (printing ``held``, ``ended``)."""
    while True:
        before = time.monotonic()
        if holds():
            break
        time.sleep(SAMPLE_EVERY)
    print(f"held {before!r}", flush=True)
    last_true = time.monotonic()
    while True:
        if quiet.is_set():
            print("quiet", flush=True)
            go.wait()
        held = holds()
        now = time.monotonic()
        if not held:
            print(f"ended {last_true!r} {now!r}", flush=True)
            return
        last_true = now
        time.sleep(SAMPLE_EVERY)


if __name__ == "__main__":
    main()
