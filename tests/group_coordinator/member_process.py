"""One group member in its own process, for the kill -9 loops.

    python -m tests.group_coordinator.member_process CONFIG_JSON

CONFIG_JSON: {"url", "options", "group", "member", "units", "assignors", "session"}.
Prints the Worker's reports as JSON lines (flushed at once), "ready" after joining;
SIGTERM makes it leave the group gracefully and print "left" before exiting.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

import kubecoord
from tests.group_coordinator.worker import Worker

_lock = threading.Lock()


def report(line: dict[str, Any]) -> None:
    text = json.dumps(line)
    with _lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def main() -> None:
    config = json.loads(sys.argv[1])
    coordinator = kubecoord.connect(config["url"], **config["options"])
    worker = Worker(
        coordinator, config["group"], config["member"], config["units"], report,
        assignors=config["assignors"], session_timeout=config["session"],
    )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    worker.start()
    report({"e": "ready", "member": config["member"]})
    done.wait()
    worker.leave()
    report({"e": "left", "member": config["member"]})
    coordinator.close()


if __name__ == "__main__":
    main()
