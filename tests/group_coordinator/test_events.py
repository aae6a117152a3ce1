"""The group coordinator's event log: rebalance_started, assigned and revoked with the
generation and the units, in the coordinator's own history."""

from __future__ import annotations

import json
import pathlib
import uuid
from typing import Any

import kubecoord
from kubecoord.group_coordinator import UnitsProtocol

from ..helpers import eventually


def _events(path: pathlib.Path) -> list[dict[str, Any]]:  # parsed JSON lines
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e["event"] in ("rebalance_started", "rebalance_completed", "assigned", "revoked")]


def test_rebalance_events_carry_generation_and_units(tmp_path: pathlib.Path) -> None:
    url = f"memory://events-{uuid.uuid4().hex[:8]}"
    units = [f"p{i}" for i in range(4)]
    first_log, second_log = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with kubecoord.connect(url, history=str(first_log)) as one, kubecoord.connect(url, history=str(second_log)) as two:
        a = one.group_coordinator("g", UnitsProtocol(units), member_id="a", session_timeout=1.0)
        a.join(timeout=10)
        b = two.group_coordinator("g", UnitsProtocol(units), member_id="b", session_timeout=1.0)
        b.join()
        eventually(lambda: a.is_stable() and b.is_stable() and a.generation == b.generation, 10)
        shared = b.generation
        b.leave()
        eventually(lambda: a.is_stable() and a.generation > shared, 10)
        a.leave()
    first = _events(first_log)
    assigned = [e for e in first if e["event"] == "assigned"]
    assert assigned[0]["units"] == units and assigned[0]["member"] == "a"
    assert [e["generation"] for e in assigned] == sorted({e["generation"] for e in assigned})  # strictly increasing
    assert len(assigned[1]["units"]) == 2 and assigned[-1]["units"] == units
    revoked = [e for e in first if e["event"] == "revoked"]
    assert revoked and revoked[0]["units"] == units and revoked[0]["generation"] == assigned[0]["generation"]
    assert any(e["event"] == "rebalance_started" and e.get("role") == "leader" for e in first)
    second = _events(second_log)
    assert [e["event"] for e in second if e["event"] in ("assigned", "revoked")] == ["assigned", "revoked"]
    assert all(e["primitive"] == "group_coordinator" and e["name"] == "g" for e in first + second)
