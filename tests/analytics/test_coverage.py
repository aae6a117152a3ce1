"""Lost coverage from the read's seq ranges (no pass over the events) is what the sorted
pass finds, and a process's ranges are not trusted when a copy or a restart may hide in
them: its events take the pass, the others' do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubecoord.analytics import coverage
from kubecoord.analytics.progress import Progress
from kubecoord.analytics.reading import Inputs, read_inputs

from .histories import Log


def logs(root: Path, *, gap_inside: bool = False) -> list[Log]:
    """Two processes: ``late`` starts late and its log was rotated into three files with
    events lost between them; ``whole`` is whole (or loses some inside a file)."""
    late = [Log(root / f"late-{i}.jsonl", "late") for i in (1, 2, 3)]
    whole = Log(root / "whole.jsonl", "whole")
    for log, skip, count in zip(late, (6, 16, 60), (7, 33, 20), strict=True):
        log.skip(skip)  # seqs 7-13, 17-49, 61-80
        for i in range(count):
            log.group(float(skip + i), "g", "renewed", "m1")
    for i in range(60):
        if gap_inside and i == 30:
            whole.skip(2)
        whole.group(float(i), "g", "renewed", "m2")
    return [*late, whole]


def read(spark: Any, logs: list[Log]) -> Inputs:
    for log in logs:
        log.write()
    return read_inputs(spark, [str(log.path) for log in logs], progress=Progress("test", enabled=False))


def rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in frame.collect())


def sorts_events(frame: Any) -> bool:
    """Whether computing ``frame`` runs a window (the sorted pass) over the events."""
    return "Window" in frame._jdf.queryExecution().executedPlan().toString()


def test_the_ranges_give_the_sorted_pass_findings(spark: Any, tmp_path: Path, small_splits: None) -> None:
    inputs = read(spark, logs(tmp_path))
    try:
        assert len(inputs.ranges) > len({r["file"] for r in inputs.ranges}) == 4  # files split across tasks
        fast = coverage.resolve(spark, inputs.events, inputs.ranges)
        assert fast.sorted_processes == [] and fast.persisted == []
        assert not sorts_events(fast.events) and sorts_events(coverage.deduplicate(inputs.events).events)
        expected = rows(coverage.deduplicate(inputs.events).findings)
        assert [(r[0], r[1], r[2], r[3], r[4]) for r in expected] == [
            ("gap", "late", 13, 17, 3), ("gap", "late", 49, 61, 11), ("late_start", "late", 0, 7, 6),
        ]
        assert rows(fast.findings) == expected
    finally:
        inputs.lines.unpersist()


@pytest.mark.parametrize("case", ["copy", "restart", "interleaved", "gap inside a file"])
def test_the_ranges_are_not_trusted_when_copies_may_hide_in_them(spark: Any, tmp_path: Path, case: str) -> None:
    *late, whole = logs(tmp_path, gap_inside=case == "gap inside a file")
    extra = Log(tmp_path / "extra.jsonl", "whole")
    if case == "copy":  # an archive copy of a part of the log
        extra.lines = whole.lines[10:20]
    elif case == "restart":  # the same process name numbering from 1 again
        extra.group(100.0, "g", "joined", "m2")
    elif case == "interleaved":  # another process's line between this one's (no copy)
        other = Log(tmp_path / "unused.jsonl", "other")
        other.group(0.5, "g", "joined", "m3")
        whole.lines.insert(30, other.lines[0])
    inputs = read(spark, [*late, whole] + ([extra] if extra.lines else []))
    try:
        covered = coverage.resolve(spark, inputs.events, inputs.ranges)
        assert covered.sorted_processes == ["whole"] and sorts_events(covered.events)
        assert rows(covered.findings) == rows(coverage.deduplicate(inputs.events).findings)
        assert rows(covered.events) == rows(coverage.deduplicate(inputs.events).events)
        for frame in covered.persisted:
            frame.unpersist()
    finally:
        inputs.lines.unpersist()
