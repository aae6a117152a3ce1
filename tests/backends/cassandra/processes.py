"""Candidate processes of the Cassandra tests (kubecoord's and the seed plugin's) and the
leadership intervals their logs show, for overlap and epoch checks."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers import spawn_ready


@dataclass
class Peer:
    """One candidate process: a kubecoord candidate (its event log) or a seed peer (its log)."""

    id: str
    kind: str  # "kubecoord" | "seed"
    process: subprocess.Popen[str]
    log: Path
    stopped_at: float | None = None

    def describe(self) -> str:
        """Its event log and the end of its stderr: what a failing test shows of it."""
        stderr = self.log.with_suffix(".stderr")
        tail = stderr.read_text()[-3000:] if stderr.exists() else ""
        return f"--- {self.id} ({self.kind}): events\n{self.log.read_text() if self.log.exists() else ''}" \
               f"--- {self.id}: stderr (end)\n{tail}"

    def stop(self, *, kill: bool) -> None:
        """kill -9 (``kill``) or SIGTERM; the moment is the end of a leadership it held."""
        import time

        self.stopped_at = time.time()
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(30)

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.log)

    def intervals(self) -> list[tuple[float, float, int | None, str]]:
        """(start, end, epoch, id) of every leadership this process believed it held; one still
        running ends when the process was stopped (or never, if it runs on)."""
        return intervals_in(self.events(), self.id, self.stopped_at)


def read_events(log: Path) -> list[dict[str, Any]]:
    """A JSON Lines log; "at" = each event's wall-clock time (from "ts" for kubecoord's)."""
    if not log.exists():
        return []
    found = []
    for line in log.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a last line still being written
        if "at" not in event and "ts" in event:
            event["at"] = dt.datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
        found.append(event)
    return found


def intervals_in(
    events: list[dict[str, Any]], who: str, stopped_at: float | None = None, *, member: str | None = None
) -> list[tuple[float, float, int | None, str]]:
    """(start, end, epoch, who) of the leaderships an event log shows (of ``member`` only, if given).

    A leadership ends at its ``lost`` event, or earlier, at the ``valid_until`` of its last
    acquire or renewal: is_leader() turned False then, and a candidate blocked in a request
    (a held connection) logs ``lost`` only once that request returns."""
    found: list[tuple[float, float, int | None, str]] = []
    start: tuple[float, int | None] | None = None
    valid_until = float("inf")
    for event in events:
        if member is not None and event.get("member") != member:
            continue
        if event.get("primitive", "leader_election") != "leader_election":
            continue
        if event["event"] in ("acquired", "renewed") and event.get("valid_until"):
            valid_until = dt.datetime.fromisoformat(event["valid_until"].replace("Z", "+00:00")).timestamp()
        if event["event"] == "acquired":
            start = (event["at"], event.get("epoch"))
        elif event["event"] == "lost" and start is not None:
            found.append((start[0], min(event["at"], valid_until), start[1], who))
            start = None
        elif event["event"] == "resigned" and start is not None:
            found.append((start[0], event["at"], start[1], who))
            start = None
    if start is not None:
        found.append((start[0], stopped_at or float("inf"), start[1], who))
    return found


def _spawn(args: list[str], peer_id: str, kind: str, log: Path, logs: Path) -> Peer:
    return Peer(peer_id, kind, spawn_ready(args, peer_id, logs / f"{peer_id}.stderr"), log)


def spawn_candidate(url: str, service: str, peer_id: str, logs: Path) -> Peer:
    log = logs / f"{peer_id}.jsonl"
    return _spawn(["tests.backends.cassandra.candidate_process", url, service, peer_id, str(log)], peer_id,
                  "kubecoord", log, logs)


def spawn_seed(host: str, keyspace: str, service: str, peer_id: str, logs: Path) -> Peer:
    log = logs / f"{peer_id}.jsonl"
    return _spawn(["tests.backends.cassandra.seed_peer", host, keyspace, service, peer_id, str(log)], peer_id, "seed",
                  log, logs)


def assert_no_overlap(peers: list[Peer]) -> list[tuple[float, float, int | None, str]]:
    """No two believed leaderships overlap; kubecoord epochs strictly increase. Returns them in order."""
    return assert_intervals_apart([interval for peer in peers for interval in peer.intervals()])


def assert_intervals_apart(
    found: list[tuple[float, float, int | None, str]],
) -> list[tuple[float, float, int | None, str]]:
    intervals = sorted(found)
    for (_, end, _, who), (start, _, _, next_who) in itertools.pairwise(intervals):
        assert end < start, f"{next_who} led from {start:.3f} while {who} led until {end:.3f}: {intervals}"
    epochs = [epoch for _, _, epoch, _ in intervals if epoch is not None]
    assert epochs == sorted(set(epochs)), f"kubecoord epochs did not strictly increase: {epochs}"
    return intervals


@contextlib.contextmanager
def described_on_failure(peers: list[Peer]) -> Iterator[None]:
    """An assertion failing inside says what every peer logged."""
    try:
        yield
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n" + "\n".join(peer.describe() for peer in peers)) from failure


def stop_all(peers: list[Peer]) -> None:
    for peer in peers:
        if peer.process.poll() is None:
            peer.process.kill()
        peer.process.wait()
