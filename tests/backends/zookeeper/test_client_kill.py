"""kill -9 of candidate processes: one leader at a time, epochs strictly increasing.

Three candidate processes run for one service; 20 times the leading process is killed
with SIGKILL and replaced. Each process logs its "acquired" events (with the epoch) to
its own event log; an observer in the test process records who leads. Checked: every new leader
acquired only after the previous one was dead (no overlap of leadership intervals), the
epochs observed strictly increase, and the leader each time is the process that says so.
"""

from __future__ import annotations

import datetime as dt
import itertools
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import kubecoord
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import Recorder, eventually, spawn_ready

from .helpers import events

SESSION_TIMEOUT = 2.0
FAILOVERS = 20


@dataclass
class Candidate:
    id: str
    process: subprocess.Popen[str]
    history: Path
    killed_at: float | None = None

    def acquired(self) -> list[dict[str, Any]]:
        """The candidate's "acquired" events, with "at": its own wall-clock time of acquiring."""
        found = []
        for event in events(self.history):
            if event["event"] == "acquired":
                event["at"] = dt.datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
                found.append(event)
        return found


def spawn(url: str, candidate_id: str, logs: Path) -> Candidate:
    history = logs / f"{candidate_id}.jsonl"
    process = spawn_ready(["tests.backends.zookeeper.candidate_process", url, "svc", candidate_id,
                           str(SESSION_TIMEOUT), str(history)], candidate_id, logs / f"{candidate_id}.stderr")
    return Candidate(candidate_id, process, history)


@pytest.mark.slow
def test_twenty_kill_9_failovers_never_overlap(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    url = f"zookeeper://{zookeeper_server.hosts}/kill-{uuid.uuid4().hex[:8]}"
    candidates: dict[str, Candidate] = {}
    try:
        with kubecoord.connect(url, lease_duration=SESSION_TIMEOUT) as observer_coord:
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
                def says_acquired(h: Candidate = holder, e: int = leader.epoch) -> bool:
                    return any(a["epoch"] == e for a in h.acquired())

                eventually(says_acquired, 30)
                epochs.append(leader.epoch)
                if round_ == FAILOVERS:
                    break
                holder.killed_at = time.time()
                holder.process.kill()
                holder.process.wait()
                new_id = f"p{len(candidates)}"
                candidates[new_id] = spawn(url, new_id, tmp_path)

                def another_leads(old: str = leader.id) -> bool:
                    return bool(seen.calls) and seen.calls[-1] not in (old, None)

                eventually(another_leads, 30)
    finally:
        for candidate in candidates.values():
            candidate.process.kill()
            candidate.process.wait()

    assert epochs == sorted(set(epochs)), f"epochs did not strictly increase: {epochs}"
    # Leadership intervals: [acquired, killed]; each must end before the next begins.
    intervals = sorted(
        (event["at"], event["epoch"], c.killed_at or float("inf"), c.id)
        for c in candidates.values() for event in c.acquired()
    )
    assert len(intervals) == FAILOVERS + 1, f"every leader acquired exactly once: {intervals}"
    for (_, epoch, end, who), (next_start, next_epoch, _, next_who) in itertools.pairwise(intervals):
        assert end < next_start, f"{next_who} acquired at {next_start} before {who} was killed at {end}"
        assert next_epoch > epoch


def test_a_leader_paused_past_its_session_says_its_leadership_ended_with_the_session(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """SIGSTOP of the leading process for longer than its session: another candidate takes
    over meanwhile, and the resumed leader's ``lost`` event — written only after SIGCONT —
    says (valid_until) that its leadership ended when its session's proven life did,
    before the successor acquired; the event's own ts is after it."""
    url = f"zookeeper://{zookeeper_server.hosts}/pause-{uuid.uuid4().hex[:8]}"
    paused = spawn(url, "p0", tmp_path)
    candidates = [paused]
    try:
        eventually(lambda: bool(paused.acquired()), 30)  # p0 leads before p1 can race it
        other = spawn(url, "p1", tmp_path)
        candidates.append(other)
        paused.process.send_signal(signal.SIGSTOP)
        eventually(lambda: bool(other.acquired()), 30)
        time.sleep(0.5)
        paused.process.send_signal(signal.SIGCONT)

        def lost() -> dict[str, Any] | None:
            return next((e for e in events(paused.history) if e["event"] == "lost"), None)

        eventually(lambda: lost() is not None, 30)
    finally:
        for candidate in candidates:
            candidate.process.send_signal(signal.SIGCONT)
            candidate.process.kill()
            candidate.process.wait()
    event = lost()
    assert event is not None and "valid_until" in event
    ended, logged = (dt.datetime.fromisoformat(event[f].replace("Z", "+00:00")).timestamp()
                     for f in ("valid_until", "ts"))
    successor = other.acquired()[0]["at"]
    assert ended < successor < logged
