"""Real candidates on the memory backend, history on, the leader crashes -> analyze.

Three coordinators share memory://NAME with a ManualClock, each logging to its own
file; the leader is crashed (kubecoord.testing.crash, the analogue of kill -9) and the
clock moved past the session timeout in two steps. The analysis must find no
violation and exactly one failover gap, caused by expiry, no longer than the step in
which the expiry happened.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import kubecoord
from kubecoord.analytics.pipeline import analyze
from kubecoord.testing import ManualClock, crash
from tests.helpers import eventually

SESSION_TIMEOUT = 5.0
LAST_STEP = 0.7


def test_crashed_leader_gives_one_bounded_failover_and_no_violation(spark: Any, tmp_path: Path) -> None:
    clock = ManualClock()
    url = f"memory://e2e-{uuid.uuid4().hex[:8]}"
    coords = [
        kubecoord.connect(url, clock=clock, lease_duration=SESSION_TIMEOUT, history=tmp_path / f"p{i}.jsonl")
        for i in range(3)
    ]
    elections = [c.leader_election("billing") for c in coords]
    assert [e.nominate(f"pod-{i}") for i, e in enumerate(elections)] == [True, False, False]
    for i, coord in enumerate(coords):
        coord.group_membership("workers").join(f"w{i}")
        kv = coord.storage("config")
        if i == 0:
            kv.put("topics/orders", "3")
        current = kv.fetch_versioned("topics/orders").result()
        assert current is not None
        kv.update("topics/orders", f"{i + 4}", expected_version=current.version)
        clock.advance(1.0)

    crash(coords[0])
    clock.advance(SESSION_TIMEOUT - 0.5)  # not yet expired
    assert elections[1].get_leader() is not None and elections[1].get_leader().id == "pod-0"  # type: ignore[union-attr]
    clock.advance(LAST_STEP)  # expired within this step
    eventually(lambda: elections[1].is_leader("pod-1"), timeout=60)  # headroom on a loaded machine
    for coord in (coords[2], coords[1]):  # the follower first, so no second failover
        coord.close()

    result = analyze(spark, [str(tmp_path / "p*.jsonl")], skew=0.5)
    try:
        assert result.summary["violations"] == dict.fromkeys(result.summary["violations"], 0)
        gaps = [row.asDict() for row in result.tables["failover_gaps"].collect()]
        assert len(gaps) == 1
        (gap,) = gaps
        assert (gap["from_member"], gap["to_member"], gap["cause"]) == ("pod-0", "pod-1", "expiry")
        assert (gap["from_epoch"], gap["to_epoch"]) == (1, 2)
        assert 0 <= gap["gap"] <= LAST_STEP
        # Lease semantics (the memory backend runs the lease core): the crash logged the
        # leader's last renewal, valid until its renew deadline (0.9 x the session timeout);
        # the follower took over a whole lease (the session timeout) after seeing that
        # renewal, when the walked clock reached it: 0.1 x the session timeout later.
        assert gap["gap"] == pytest.approx(SESSION_TIMEOUT * 0.1, abs=1e-3)
        expiries = [row.asDict() for row in result.tables["heartbeat_to_expiry"].collect()]
        assert [(e["member"], round(e["heartbeat_to_expiry"], 3)) for e in expiries] == [
            ("w0", round(SESSION_TIMEOUT - 0.5 + LAST_STEP, 3))
        ]
        stores = result.tables["kv_stores"].collect()
        assert [(s["operations"], s["conflicts"]) for s in stores] == [(4, 0)]
    finally:
        result.close()
