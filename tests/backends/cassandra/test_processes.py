"""Candidate processes racing on cassandra://: kill -9 and SIGTERM failovers never overlap and
their epochs strictly increase; compare-and-set increments from four processes lose nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import kubecoord
from tests.helpers import ROOT, eventually

from .processes import Peer, assert_no_overlap, spawn_candidate, stop_all
from .timings import TIMINGS

FAILOVERS = 5


def _leader_id(election: kubecoord.LeaderElection) -> str | None:
    leader = election.get_leader()
    return leader.id if leader else None


@pytest.mark.slow
@pytest.mark.parametrize("kill", [True, False], ids=["kill-9", "sigterm"])
def test_failovers_never_overlap_and_epochs_increase(cassandra_url: str, tmp_path: Path, kill: bool) -> None:
    """Three candidate processes; the leading one is killed (or SIGTERMed: it resigns) and
    replaced, FAILOVERS times. Every process's own log of its leadership is checked."""
    service = f"fail-{uuid.uuid4().hex[:8]}"
    peers: dict[str, Peer] = {}
    try:
        with kubecoord.connect(cassandra_url, **TIMINGS) as observer_coordinator:
            observer = observer_coordinator.leader_election(service)
            for index in range(3):
                peers[f"p{index}"] = spawn_candidate(cassandra_url, service, f"p{index}", tmp_path)
            for _ in range(FAILOVERS):
                eventually(lambda: _leader_id(observer) in peers, 30)
                holder = peers[str(_leader_id(observer))]

                def says_it_leads(h: Peer = holder) -> bool:
                    return bool(h.intervals())

                eventually(says_it_leads, 30)  # its own log says it leads
                holder.stop(kill=kill)
                new_id = f"p{len(peers)}"
                peers[new_id] = spawn_candidate(cassandra_url, service, new_id, tmp_path)

                def another_leads(old: str = holder.id) -> bool:
                    return _leader_id(observer) not in (old, None)

                eventually(another_leads, 30)
            eventually(lambda: any(p.intervals() for p in peers.values() if p.stopped_at is None), 30)
    finally:
        stop_all(list(peers.values()))
    intervals = assert_no_overlap(list(peers.values()))
    assert len(intervals) >= FAILOVERS + 1


@pytest.mark.slow
def test_four_processes_fifty_increments_each_lose_nothing(cassandra_url: str) -> None:
    store = f"cas-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(cassandra_url, **TIMINGS) as coord:
        coord.storage(store).put("counter", "0")
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.backends.cassandra.increment_process", cassandra_url, store, "counter", "50"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for _ in range(4)
    ]
    outputs = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=150)
            assert worker.returncode == 0, err[-2000:]
            outputs.append(out)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert all(out.startswith("done") for out in outputs)
    with kubecoord.connect(cassandra_url, **TIMINGS) as coord:
        final = coord.storage(store).fetch_versioned("counter").result()
    assert final == kubecoord.Versioned("200", 201)
