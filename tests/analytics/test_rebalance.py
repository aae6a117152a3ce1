"""Group coordinator checks (kubecoord.analytics.rebalance): holdings, a unit owned twice,
work on a stale generation, rebalance durations — on hand-written logs, and on the log
of a real run of the coordinator (memory backend) where nothing may be found."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kubecoord
from kubecoord.analytics.pipeline import Analysis, analyze
from kubecoord.group_coordinator import UnitsProtocol, decode_units
from kubecoord.testing import crash
from tests.helpers import eventually

from .histories import Log, where

"""The module's analysis runs in its first test's set-up: ~40 s at load 5, past the
default 180 s at load 18 (a fresh-clone run beside two engineers' Spark jobs)."""

COORD = "group_coordinator"
Case = tuple[Analysis, Log, Log, dict[str, int], list[int]]
"""The analysis, the hand-written logs, their lines by name, the real run's stable generations."""


def _rows(analysis: Analysis, table: str, kind: str | None = None) -> list[dict[str, Any]]:
    frame = analysis.tables[table]
    if kind is not None:
        frame = frame.filter(f"type = '{kind}'")
    return [row.asDict(recursive=True) for row in frame.collect()]


@pytest.fixture(scope="module")
def case(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    root = tmp_path_factory.mktemp("rebalance")
    p1, p2 = Log(root / "p1.jsonl", "p1"), Log(root / "p2.jsonl", "p2")
    operator = Log(root / "operator.jsonl", "kubecoord-operator", source="operator")
    lines = {
        # Generation 1: a holds u0,u1; generation 2: a revokes, b gets u1 (clean handover).
        "g1_start": p1.add(0, COORD, "clean", "rebalance_started", member="a", generation=1),
        "g1_a": p1.add(1, COORD, "clean", "assigned", member="a", generation=1, units=["u0", "u1"]),
        "g2_start": p1.add(10, COORD, "clean", "rebalance_started", member="a", generation=2),
        "g2_rev": p1.add(11, COORD, "clean", "revoked", member="a", generation=1, units=["u0", "u1"]),
        "g2_a": p1.add(13, COORD, "clean", "assigned", member="a", generation=2, units=["u0"]),
        "g2_b": p2.add(14, COORD, "clean", "assigned", member="b", generation=2, units=["u1"]),
        # A killed member: c holds u9, expires (observed by p2), then d gets u9.
        "k_c": p1.add(0, COORD, "killed", "assigned", member="c", generation=1, units=["u9"]),
        "k_exp": p2.group(20, "killed", "expired", "c"),
        "k_d": p2.add(25, COORD, "killed", "assigned", member="d", generation=2, units=["u9"]),
        # Owned twice: e holds x, f is given x 5 s before e revokes it.
        "t_e": p1.add(0, COORD, "twice", "assigned", member="e", generation=3, units=["x"]),
        "t_f": p2.add(10, COORD, "twice", "assigned", member="f", generation=4, units=["x"]),
        "t_rev": p1.add(15, COORD, "twice", "revoked", member="e", generation=3, units=["x"]),
        # Nobody logged the killed member j's expiry (ZooKeeper): its units are free once the
        # leader fenced it; k takes u7 after that, l was given u8 before it (owned twice).
        "f_j": p1.add(0, COORD, "fenced", "assigned", member="j", generation=1, units=["u7", "u8"]),
        "f_l": p2.add(12, COORD, "fenced", "assigned", member="l", generation=2, units=["u8"]),
        "f_fence": p2.add(20, COORD, "fenced", "fenced", member="j", generation=2, role="leader"),
        "f_k": p2.add(22, COORD, "fenced", "assigned", member="k", generation=2, units=["u7"]),
        # The operator logs what it observes: n arriving (no second join) and n's expiry, which
        # ends n's units before o is given them.
        "o_n": p1.group(0, "observed", "joined", "n"),
        "o_seen": operator.group(0.5, "observed", "joined", "n"),
        "o_held": p1.add(1, COORD, "observed", "assigned", member="n", generation=1, units=["u5"]),
        "o_exp": operator.group(30, "observed", "expired", "n"),
        "o_o": p2.add(35, COORD, "observed", "assigned", member="o", generation=2, units=["u5"]),
        # Stale: h starts on generation 6 ten seconds after g was assigned generation 7.
        "s_g": p1.add(0, COORD, "stale", "assigned", member="g", generation=7, units=[]),
        "s_h": p2.add(10, COORD, "stale", "assigned", member="h", generation=6, units=[]),
    }
    for log in (p1, p2, operator):
        log.write()
    stable = _run_members(root / "real")
    result = analyze(spark, [str(p1.path), str(p2.path), str(operator.path), str(root / "real")], skew=1.0)
    yield result, p1, p2, lines, stable
    result.close()


def test_violations_found_with_their_evidence(case: Case) -> None:
    analysis, p1, p2, lines, _ = case
    counts = analysis.summary["violations"]
    # None from the real run, and no duplicate_member for the operator's observation.
    assert (counts["unit_owned_twice"], counts["stale_generation_work"], counts["duplicate_member"]) == (2, 1, 0)
    found = _rows(analysis, "violations", "unit_owned_twice")
    twice, before_fencing = sorted(found, key=lambda violation: violation["name"] != "twice")
    assert (before_fencing["name"], before_fencing["subject"]) == ("fenced", "u8")
    assert [(e["file"], e["line"]) for e in before_fencing["evidence"]] == [
        where(p1, lines["f_j"]), where(p2, lines["f_l"])
    ]
    assert (twice["name"], twice["subject"], twice["primitive"]) == ("twice", "x", COORD)
    assert "given to f" in twice["detail"] and "while e held it" in twice["detail"]
    assert [(e["file"], e["line"]) for e in twice["evidence"]] == [where(p1, lines["t_e"]), where(p2, lines["t_f"])]
    (stale,) = _rows(analysis, "violations", "stale_generation_work")
    assert stale["detail"] == "h started on generation 6 after generation 7 was assigned (g)"
    assert [(e["file"], e["line"]) for e in stale["evidence"]] == [where(p1, lines["s_g"]), where(p2, lines["s_h"])]


def test_holdings_and_durations(case: Case) -> None:
    analysis = case[0]
    holdings = {(h["name"], h["member"], h["unit"], h["generation"]): h for h in _rows(analysis, "unit_holdings")}
    assert holdings[("clean", "a", "u1", 1)]["end_reason"] == "revoked"
    assert holdings[("clean", "b", "u1", 2)]["end_reason"] == "open"
    assert holdings[("killed", "c", "u9", 1)]["end_reason"] == "member_gone"
    assert holdings[("fenced", "j", "u7", 1)]["end_reason"] == "fenced"
    assert holdings[("observed", "n", "u5", 1)]["end_reason"] == "member_gone"
    memberships = [m for m in _rows(analysis, "membership_timeline") if m["name"] == "observed"]
    assert [(m["process"], m["end_reason"]) for m in memberships] == [("p1", "expired")]
    durations = {(r["name"], r["generation"]): r["duration"] for r in _rows(analysis, "rebalances")}
    assert durations[("clean", 1)] == pytest.approx(1.0) and durations[("clean", 2)] == pytest.approx(4.0)
    summary = analysis.summary["rebalance"]
    assert summary["groups"] == 2 and summary["duration_seconds"][0]["group"] == "all"


def _run_members(directory: Path) -> list[int]:
    """Members join, leave and crash on memory:// (group "work"), each logging to its own
    file; the generations the members reached stably after the joins, the leave and the crash.

    Each step waits for a generation later than the last one's: right after leave() the
    members are still stable on the old generation, and a crash during the rebalance that
    follows ends that rebalance before it completes (the leader starts another once the
    crashed member's session ran out)."""
    directory.mkdir()
    url = f"memory://pipeline-{uuid.uuid4().hex[:8]}"
    units = [f"p{i}" for i in range(8)]
    coordinators, members = [], []
    for index in range(3):
        coordinator = kubecoord.connect(url, lease_duration=1.0, history=str(directory / f"m{index}.jsonl"))
        member = coordinator.group_coordinator("work", UnitsProtocol(units), member_id=f"m{index}", session_timeout=0.5)
        member.join()
        coordinators.append(coordinator)
        members.append(member)
    stable: list[int] = []

    def settled(group: list[Any], *, units: int | None = None) -> bool:
        generations = {m.generation for m in group}
        if not all(m.is_stable() for m in group) or len(generations) != 1:
            return False
        (generation,) = generations
        if generation < 0 or (stable and generation <= stable[-1]):
            return False
        if units is not None and len(decode_units(group[0].assignment or b"")[0]) != units:
            return False
        stable.append(generation)
        return True

    eventually(lambda: settled(members), 10)
    members[2].leave()
    eventually(lambda: settled(members[:2]), 10)
    crash(coordinators[1])
    eventually(lambda: settled(members[:1], units=8), 10)
    for coordinator in (coordinators[0], coordinators[2]):
        coordinator.close()
    return stable


def test_a_real_coordinator_log_is_clean(case: Case) -> None:
    """The run of _run_members: no violation, a duration for each generation the members
    reached stably (the joins', the leave's, the crash's)."""
    analysis, stable = case[0], case[4]
    assert [v for v in _rows(analysis, "violations") if v["name"] == "work"] == []
    durations = [r for r in _rows(analysis, "rebalances") if r["name"] == "work"]
    assert len(stable) == 3 and set(stable) <= {r["generation"] for r in durations}, (stable, durations)
    assert all(r["duration"] >= 0 for r in durations)
    holdings = [h for h in _rows(analysis, "unit_holdings") if h["name"] == "work"]
    assert {h["end_reason"] for h in holdings if h["member"] == "m1"} <= {"revoked", "member_gone", "fenced"}
    # m0 ends with every unit, until its coordinator closed: closing leaves the group, and
    # leaving gives the units up first (on_leave_prepare, as KIP-795 does), so they end revoked.
    last_generation = max(h["generation"] for h in holdings if h["member"] == "m0")
    assert {
        h["unit"] for h in holdings
        if h["member"] == "m0" and h["generation"] == last_generation and h["end_reason"] == "revoked"
    } == {f"p{i}" for i in range(8)}
