"""Group members for the multi-process tests: what they report, one member per process.

- ``Group``: the members of one test, their reports (Worker lines, tests/group_coordinator/worker.py),
  who was killed when, ``settled()``: every unit held once, by live members, balanced, and
  ``working()``: settled, and every live member's ensure_generation() passed since its
  latest assignment (a work tick);
- ``ProcessMember``: python -m tests.group_coordinator.member_process in a process of its own;
  ``kill()`` is kill -9, ``leave()`` is SIGTERM (a graceful leave) and waits for the exit.
"""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Protocol

from .checks import holders


class Member(Protocol):
    name: str

    def kill(self) -> None: ...
    def leave(self) -> None: ...


class Group:
    """The members of one test and everything they reported."""

    def __init__(self, units: list[str], name: str | None = None) -> None:
        self.units = units
        self.name = name or f"churn-{uuid.uuid4().hex[:8]}"
        self.reports: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.killed: dict[str, float] = {}
        self.alive: dict[str, Member] = {}
        self.gone: list[Member] = []

    def report(self, line: dict[str, Any]) -> None:
        with self.lock:
            self.reports.append(line)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.reports)

    def settled(self) -> bool:
        owner = holders(self.snapshot(), self.killed)
        counts = [sum(1 for m in owner.values() if m == name) for name in self.alive]
        return sorted(owner) == sorted(self.units) and set(owner.values()) <= set(self.alive) and (
            max(counts) - min(counts) <= 1
        )

    def working(self) -> bool:
        """settled(), and each live member reported a work tick, since its latest
        assignment, on that generation or a later one: the group is not only assigned but
        acting on it. (A test that acts again as soon as the group is settled leaves the
        members a few milliseconds between an assignment and the next rebalance, too few
        for a tick on a loaded machine.)"""
        if not self.settled():
            return False
        assigned: dict[str, int] = {}
        worked: set[str] = set()
        for line in sorted(self.snapshot(), key=lambda line: line.get("t", 0.0)):
            member = line.get("member")
            if not isinstance(member, str):
                continue
            if line.get("e") == "assigned":
                assigned[member] = line["gen"]
                worked.discard(member)
            elif line.get("e") == "work" and member in assigned and line["gen"] >= assigned[member]:
                worked.add(member)  # cooperative: a generation that adds no unit logs no assignment
        return set(self.alive) <= worked


class ProcessMember:
    def __init__(self, group: Group, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.group = group
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.group_coordinator.member_process",
             json.dumps({**config, "member": name, "group": group.name})],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=pathlib.Path(__file__).parents[2],
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.group.report(json.loads(raw))

    def kill(self) -> None:
        if self.process.poll() is None:
            self.group.killed[self.name] = time.time()
            self.process.kill()
        self.process.wait()
        self.reader.join(5)

    def leave(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(30)
        self.reader.join(5)
