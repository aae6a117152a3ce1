"""kill -9 of candidate processes: one leader at a time, epochs strictly increasing.

Three candidate processes run for one service; 20 times the leading process is killed
with SIGKILL and replaced. Each process logs its "acquired" events (with the epoch) on
stdout; an observer in the test process records who leads. Checked: every new leader
acquired only after the previous one was dead (no overlap of leadership intervals), the
epochs observed strictly increase, and the leader each time is the process that says so.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import kubecoord
from kubecoord.backends.zookeeper.testserver import ZooKeeperServer

from ..helpers import Recorder, eventually

ROOT = Path(__file__).resolve().parents[2]
SESSION_TIMEOUT = 2.0
FAILOVERS = 20


@dataclass
class Candidate:
    id: str
    process: subprocess.Popen[str]
    acquired: list[dict[str, Any]] = field(default_factory=list)
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    killed_at: float | None = None

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                if event["event"] == "acquired":
                    # The process's own record of when it started to lead (same machine, same clock).
                    event["at"] = dt.datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
                    self.acquired.append(event)
            self.lines.put(line.strip())


def spawn(url: str, candidate_id: str, logs: Path) -> Candidate:
    stderr = logs / f"{candidate_id}.stderr"
    with open(stderr, "w") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.zookeeper.candidate_process", url, "svc", candidate_id, str(SESSION_TIMEOUT)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    candidate = Candidate(candidate_id, process)
    threading.Thread(target=candidate.read, daemon=True).start()
    deadline = time.monotonic() + 60
    try:
        while candidate.lines.get(timeout=max(0.1, deadline - time.monotonic())) != "ready":
            pass
    except queue.Empty:
        raise AssertionError(f"{candidate_id} never got ready; its stderr:\n{stderr.read_text()}") from None
    return candidate


@pytest.mark.slow
def test_twenty_kill_9_failovers_never_overlap(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    url = f"zookeeper://{zookeeper_server.hosts}/kill-{uuid.uuid4().hex[:8]}"
    candidates: dict[str, Candidate] = {}
    try:
        with kubecoord.connect(url, session_timeout=SESSION_TIMEOUT) as observer_coord:
            observer = observer_coord.leader_election("svc")
            seen: Recorder[str | None] = Recorder()
            observer.add_listener(seen)
            for index in range(3):
                candidates[f"p{index}"] = spawn(url, f"p{index}", tmp_path)
            epochs: list[int] = []
            for round_ in range(FAILOVERS + 1):
                eventually(lambda: (observer.get_leader() or kubecoord.Leader("", "", 0)).id in candidates, 30)
                leader = observer.get_leader()
                assert leader is not None
                holder = candidates[leader.id]
                assert holder.killed_at is None
                # The process itself says it acquired this epoch (its log line may trail a little).
                eventually(lambda h=holder, e=leader.epoch: any(a["epoch"] == e for a in h.acquired), 30)
                epochs.append(leader.epoch)
                if round_ == FAILOVERS:
                    break
                holder.killed_at = time.time()
                holder.process.kill()
                holder.process.wait()
                new_id = f"p{len(candidates)}"
                candidates[new_id] = spawn(url, new_id, tmp_path)
                eventually(lambda old=leader.id: seen.calls and seen.calls[-1] not in (old, None), 30)
    finally:
        for candidate in candidates.values():
            candidate.process.kill()
            candidate.process.wait()

    assert epochs == sorted(set(epochs)), f"epochs did not strictly increase: {epochs}"
    # Leadership intervals: [acquired, killed]; each must end before the next begins.
    intervals = sorted(
        (event["at"], event["epoch"], c.killed_at or float("inf"), c.id)
        for c in candidates.values() for event in c.acquired
    )
    assert len(intervals) == FAILOVERS + 1, f"every leader acquired exactly once: {intervals}"
    for (_, epoch, end, who), (next_start, next_epoch, _, next_who) in itertools.pairwise(intervals):
        assert end < next_start, f"{next_who} acquired at {next_start} before {who} was killed at {end}"
        assert next_epoch > epoch
