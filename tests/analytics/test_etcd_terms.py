"""Leadership terms on etcd: a lease kept alive without logged renewals, like a ZooKeeper
session. ``acquired`` carries the lease's proven life as valid_until, so a leader killed
with no end event leads at least until then: a successor that acquired earlier overlaps
it; one that acquired later does not; a term with an end event lasts to its end (its
renewals are not in the log), so a successor inside it overlaps it."""

from __future__ import annotations

from pathlib import Path

from .combined import Parted, module_fixture, part
from .histories import T0, Log


def _history(root: Path) -> list[Log]:
    logs: list[Log] = []

    def log(process: str, namespace: str) -> Log:
        logs.append(Log(root / f"{process}-{namespace}.jsonl", f"etcd-{process}", namespace=f"etcd-{namespace}",
                        backend="etcd"))
        return logs[-1]

    # a killed at 1 (no end event; its lease proven until 4); b acquired at 2: an overlap.
    a, b = log("a", "overlap"), log("b", "overlap")
    a.leader(0, "svc", "acquired", "a", 5, valid_until=4)
    b.leader(2, "svc", "acquired", "b", 7, valid_until=6)
    b.leader(9, "svc", "resigned", "b", 7, valid_until=9)
    # c killed (lease proven until 4); d acquired at 4.5, after the lease expired: clean.
    c, d = log("c", "expired"), log("d", "expired")
    c.leader(0, "svc", "acquired", "c", 5, valid_until=4)
    d.leader(4.5, "svc", "acquired", "d", 7, valid_until=8.5)
    d.leader(9, "svc", "resigned", "d", 7, valid_until=9)
    # e led 100 s (renewals unlogged; its end event names no valid_until) while f acquired
    # at 50: a split brain, not a term cut at the acquire's proven life.
    e, f = log("e", "long"), log("f", "long")
    e.leader(0, "svc", "acquired", "e", 5, valid_until=4)
    f.leader(50, "svc", "acquired", "f", 7, valid_until=54)
    e.leader(100, "svc", "resigned", "e", 5)
    f.leader(120, "svc", "resigned", "f", 7, valid_until=120)
    return logs


PART = part("etcd-terms", skew=0.0, build=_history)

analysis = module_fixture(PART)


def _violations(analysis: Parted, namespace: str) -> list[str]:
    rows = analysis.table("violations").filter(f"namespace = 'etcd-{namespace}'").collect()
    return [row["type"] for row in rows]


def _terms(analysis: Parted, namespace: str) -> list[tuple[str, float, float]]:
    rows = analysis.table("leadership_intervals").filter(f"namespace = 'etcd-{namespace}'").orderBy("start").collect()
    return [(r["member"], round(r["start"] - T0, 3), round(r["end"] - T0, 3)) for r in rows]


def test_a_killed_leader_overlaps_a_successor_inside_its_lease(analysis: Parted) -> None:
    assert _violations(analysis, "overlap") == ["overlapping_leadership"]
    assert _terms(analysis, "overlap")[0] == ("a", 0.0, 4.0)


def test_a_successor_after_the_lease_expired_is_clean(analysis: Parted) -> None:
    assert _violations(analysis, "expired") == []


def test_a_term_with_unlogged_renewals_lasts_to_its_end_event(analysis: Parted) -> None:
    assert _violations(analysis, "long") == ["overlapping_leadership"]
    assert _terms(analysis, "long")[0] == ("e", 0.0, 100.0)
