"""Every violation type detected with its evidence rows; malformed lines with file and line."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubecoord.analytics import layout, output
from kubecoord.analytics.pipeline import Analysis, analyze
from kubecoord.analytics.progress import Progress

from . import golden
from .histories import Log, where

"""The module's analysis runs in its first test's set-up: ~40 s at load 5, past the
default 180 s at load 18 (a fresh-clone run beside two engineers' Spark jobs)."""


@dataclass
class Case:
    analysis: Analysis
    p1: Log
    p2: Log
    lines: dict[str, int]


@pytest.fixture(scope="module")
def case(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    root = tmp_path_factory.mktemp("violations")
    p1, p2 = Log(root / "p1.jsonl", "p1"), Log(root / "p2.jsonl", "p2")
    lines = {
        # b acquires while a's renewal says it leads until 15: 9 s of overlap.
        "ov_a": p1.leader(0, "ov", "acquired", "a", 1, valid_until=10),
        "ov_a_renew": p1.leader(5, "ov", "renewed", "a", 1, valid_until=15),
        "ov_b": p2.leader(6, "ov", "acquired", "b", 2, valid_until=16),
        # b acquires epoch 4 after a held epoch 5 (no overlap).
        "ep_a": p1.leader(0, "ep", "acquired", "a", 5, valid_until=3),
        "ep_a_end": p1.leader(2, "ep", "resigned", "a", 5),
        "ep_b": p2.leader(4, "ep", "acquired", "b", 4, valid_until=10),
        # m joins from p2 while p1's m is still in.
        "dm_1": p1.group(0, "dg", "joined", "m"),
        "dm_2": p2.group(5, "dg", "joined", "m"),
        # A delete acknowledged at version 2 after version 3 was written.
        "vb_put": p1.kv(0, "vb", "put", "k", 1),
        "vb_2": p1.kv(1, "vb", "updated", "k", 2),
        "vb_3": p1.kv(2, "vb", "updated", "k", 3),
        "vb_back": p2.kv(10, "vb", "deleted", "k", 2),
        # Two writers both acknowledged version 2.
        "lu_put": p1.kv(0, "lu", "put", "x", 1),
        "lu_1": p1.kv(1, "lu", "updated", "x", 2),
        "lu_2": p2.kv(1.5, "lu", "updated", "x", 2),
        # Malformed lines, each for its own reason.
        "bad_json": p1.raw('{"v":1,"ts":"2026-01-01T00:00:00Z",'),
        "bad_version": p1.raw('{"v":2,"ts":"2026-01-01T00:00:00Z","process":"p1","namespace":"ns",'
                              '"primitive":"kv","name":"s","event":"put","key":"k","version":1}'),
        "bad_ts": p2.raw('{"v":1,"ts":"yesterday","process":"p2","namespace":"ns",'
                         '"primitive":"kv","name":"s","event":"put","key":"k","version":1}'),
        "bad_event": p2.raw('{"v":1,"ts":"2026-01-01T00:00:00Z","process":"p2","namespace":"ns",'
                            '"primitive":"kv","name":"s","event":"exploded","key":"k","version":1}'),
        "no_epoch": p2.raw('{"v":1,"ts":"2026-01-01T00:00:00Z","process":"p2","namespace":"ns",'
                           '"primitive":"leader_election","name":"e","event":"acquired","member":"a"}'),
        "no_name": p2.raw('{"v":1,"ts":"2026-01-01T00:00:00Z","process":"p2","namespace":"ns",'
                          '"primitive":"group","event":"joined","member":"a"}'),
        "array": p2.raw("[1, 2, 3]"),
    }
    p1.write()
    p2.write()
    result = analyze(spark, [str(p1.path), str(p2.path)], skew=1.0)
    yield Case(result, p1, p2, lines)
    result.close()


def violations_of(case: Case, kind: str) -> list[dict[str, Any]]:
    found = case.analysis.tables["violations"].filter(f"type = '{kind}'").collect()
    return [row.asDict(recursive=True) for row in found]


def evidence_of(violation: dict[str, Any]) -> list[tuple[str, int]]:
    return [(e["file"], e["line"]) for e in violation["evidence"]]


def test_counts_per_type(case: Case) -> None:
    assert case.analysis.summary["violations"] == {
        "overlapping_leadership": 1, "epoch_not_increasing": 1, "duplicate_member": 1,
        "version_backwards": 1, "lost_update": 1, "create_race": 0, "stale_epoch_write": 0,
        "unit_owned_twice": 0, "stale_generation_work": 0,
    }
    assert case.analysis.violation_count == 5


def test_overlapping_leadership_evidence(case: Case) -> None:
    (found,) = violations_of(case, "overlapping_leadership")
    assert (found["name"], found["subject"]) == ("ov", "b")
    assert "9.000 s of overlap" in found["detail"]
    p1, p2, lines = case.p1, case.p2, case.lines
    assert evidence_of(found) == [
        where(p1, lines["ov_a"]), where(p1, lines["ov_a_renew"]), where(p2, lines["ov_b"]), where(p2, lines["ov_b"])
    ]


def test_epoch_not_increasing_evidence(case: Case) -> None:
    (found,) = violations_of(case, "epoch_not_increasing")
    assert (found["name"], found["subject"]) == ("ep", "b")
    assert found["detail"] == "b acquired epoch 4 after a had acquired epoch 5"
    assert evidence_of(found) == [where(case.p1, case.lines["ep_a"]), where(case.p2, case.lines["ep_b"])]


def test_duplicate_member_evidence(case: Case) -> None:
    (found,) = violations_of(case, "duplicate_member")
    assert (found["name"], found["subject"]) == ("dg", "m")
    assert evidence_of(found) == [where(case.p1, case.lines["dm_1"]), where(case.p2, case.lines["dm_2"])]


def test_version_backwards_evidence(case: Case) -> None:
    (found,) = violations_of(case, "version_backwards")
    assert (found["name"], found["subject"]) == ("vb", "k")
    assert found["detail"] == "k deleted at version 2 after version 3"
    assert evidence_of(found) == [where(case.p1, case.lines["vb_3"]), where(case.p2, case.lines["vb_back"])]


def test_lost_update_evidence(case: Case) -> None:
    (found,) = violations_of(case, "lost_update")
    assert (found["name"], found["subject"]) == ("lu", "x")
    assert found["detail"] == "version 2 of x acknowledged 2 times"
    assert evidence_of(found) == [where(case.p1, case.lines["lu_1"]), where(case.p2, case.lines["lu_2"])]


def test_malformed_lines_with_file_line_and_reason(case: Case) -> None:
    found = sorted(
        (row["file"], row["line"], row["reason"]) for row in case.analysis.tables["malformed_lines"].collect()
    )
    p1, p2, lines = case.p1, case.p2, case.lines
    assert found == sorted([
        (*where(p1, lines["bad_json"]), "invalid JSON"),
        (*where(p1, lines["bad_version"]), "unsupported schema version"),
        (*where(p2, lines["bad_ts"]), "unparseable ts"),
        (*where(p2, lines["bad_event"]), "unknown primitive or event"),
        (*where(p2, lines["no_epoch"]), "leader event without an integer epoch"),
        (*where(p2, lines["no_name"]), "missing field name"),
        (*where(p2, lines["array"]), "invalid JSON"),
    ])
    summary = case.analysis.summary
    assert summary["inputs"]["malformed_lines"] == 7
    assert summary["inputs"]["events"] == 15
    assert summary["inputs"]["malformed_examples"][0]["text"].startswith('{"v":1,"ts":"2026-01-01T00:00:00Z",')


def test_the_verdicts_are_those_of_the_golden_copy(case: Case) -> None:
    golden.check("violations", golden.snapshot_analysis(case.analysis, case.p1.path.parent))


def test_the_written_tables_give_back_every_table_by_type(spark: Any, case: Case, tmp_path: Path) -> None:
    """Written as layout's four combined tables; each in-memory table comes back from its
    written table by its type with exactly its own columns, types and rows."""
    out = tmp_path / "out"
    output.write(case.analysis, str(out), progress=Progress("test", enabled=False), spark=spark)
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(layout.WRITTEN)
    intervals = spark.read.parquet(str(out / "tables" / "intervals"))
    assert {r["type"] for r in intervals.select("type").distinct().collect()} <= set(layout.WRITTEN["intervals"])

    recovered = layout.read(spark, str(out / "tables"))
    assert sorted(recovered) == sorted(case.analysis.tables)
    root = case.p1.path.parent
    for name, frame in case.analysis.tables.items():
        back = recovered[name]
        # Same names, order and types (simpleString: Parquet makes every column nullable).
        assert [(f.name, f.dataType.simpleString()) for f in back.schema.fields] == \
            [(f.name, f.dataType.simpleString()) for f in frame.schema.fields], name
        assert golden.table(back.collect(), golden.root_uris(root)) == \
            golden.table(frame.collect(), golden.root_uris(root)), name
    assert recovered["malformed_lines"].count() == 7  # not empty: the compare above compares rows
