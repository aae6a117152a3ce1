"""What an etcd coordinator's event log says of its terms: ``acquired`` carries the lease's
proven life as valid_until, and the server keeps a crashed leader's key at least that long
(the judge of the bound is the server: the successor's acquire)."""

from __future__ import annotations

import json
import pathlib
import time
import uuid
from datetime import datetime
from typing import Any

import pytest

import kubecoord
from kubecoord.testing import crash
from kubecoord_testkit.servers.etcd import EtcdCluster

from .conftest import eventually
from .timings import LEASE_DURATION, TIMINGS


def _events(log: pathlib.Path, name: str, event: str) -> list[dict[str, Any]]:
    """The events of ``name`` in ``log`` so far (the history is written in the background)."""
    found = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [e for e in found if e.get("name") == name and e["event"] == event]


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_acquired_carries_the_lease_proven_life_and_a_crashed_leader_leads_at_least_that_long(
    etcd_server: EtcdCluster, tmp_path: pathlib.Path
) -> None:
    name = f"p-{uuid.uuid4().hex[:10]}"
    url = f"etcd://{etcd_server.hosts}"
    first_log, second_log = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first = kubecoord.connect(url, history=str(first_log), **TIMINGS)
    second = kubecoord.connect(url, history=str(second_log), **TIMINGS)
    try:
        assert first.leader_election(name).nominate("a")
        eventually(lambda: bool(_events(first_log, name, "acquired")), "a's acquired never logged")
        (acquired,) = _events(first_log, name, "acquired")
        at, proven = _seconds(acquired["ts"]), _seconds(acquired["valid_until"])
        # A keep-alive (or the grant) sent before the acquire proves the lease to sent + TTL.
        assert at + LEASE_DURATION - TIMINGS["retry_period"] - 1.0 < proven <= at + LEASE_DURATION + 0.01
        crash(first)
        successor = second.leader_election(name)
        successor.nominate("b")
        eventually(lambda: successor.is_leader("b"), "b never took over from the crashed a", LEASE_DURATION + 10)
        eventually(lambda: bool(_events(second_log, name, "acquired")), "b's acquired never logged")
        (taken,) = _events(second_log, name, "acquired")
        assert _seconds(taken["ts"]) >= proven  # the server kept a's key at least until then
    finally:
        second.close()
        first.close()


@pytest.mark.parametrize("step", [0.0, -5.0])
def test_acquired_carries_when_the_candidates_key_was_put(
    etcd_server: EtcdCluster, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, step: float
) -> None:
    """A candidate leads once the older keys are gone, which others may see before it does:
    its ``acquired`` carries ``sent``, when its own key's put went out (it leads no earlier),
    as the wall clock of its ``ts`` reads it: stepped back 5 s (NTP) while the candidate
    waited, ``sent`` moves with it and stays before ``ts`` (the pipeline places ``sent`` by
    the event's ``mono``)."""
    name = f"s-{uuid.uuid4().hex[:10]}"
    url = f"etcd://{etcd_server.hosts}"
    second_log = tmp_path / "b.jsonl"
    first = kubecoord.connect(url, **TIMINGS)
    second = kubecoord.connect(url, history=str(second_log), **TIMINGS)
    try:
        election = first.leader_election(name)
        assert election.nominate("a")
        before = time.time()
        successor = second.leader_election(name)
        assert not successor.nominate("b")
        after = time.time()
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + step)
        election.resign("a")
        eventually(lambda: bool(_events(second_log, name, "acquired")), "b's acquired never logged")
        (taken,) = _events(second_log, name, "acquired")
        assert before + step <= _seconds(taken["sent"]) <= after + step < _seconds(taken["ts"])
    finally:
        second.close()
        first.close()

