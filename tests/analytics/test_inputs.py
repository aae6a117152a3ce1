"""Input that cannot sink the job (issue 14): unreadable files, malformed shares,
unmatched patterns, lines without ``v``, large files split across tasks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kubecoord.analytics.pipeline import analyze
from kubecoord.cli import main

from .histories import Log, where


def history(root: Path, process: str, *, events: int = 5) -> Log:
    log = Log(root / f"{process}.jsonl", process)
    for i in range(events):
        log.group(float(i), "g", "joined" if i == 0 else "renewed", f"m-{process}")
    return log


def test_a_truncated_gzip_is_reported_and_the_rest_analysed(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    good = history(tmp_path, "good")
    good.write()
    lines = "".join(json.dumps({"v": 1, "n": i}) + "\n" for i in range(50_000)).encode()
    (tmp_path / "torn.jsonl.gz").write_bytes(gzip.compress(lines)[:20_000])  # the writer was killed mid-file
    out = tmp_path / "out"

    status = main(["analyze", str(tmp_path / "*.jsonl*"), "--out", str(out), "--quiet"])

    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    (unreadable,) = summary["inputs"]["unreadable_files"]
    assert unreadable["file"].endswith("torn.jsonl.gz")
    assert "EOFException" in unreadable["reason"]
    assert summary["inputs"]["events"] == 5 and summary["inputs"]["files"] == 2
    captured = capfd.readouterr()
    assert "1 unreadable file(s)" in captured.out
    assert "unreadable file" in captured.err and "torn.jsonl.gz" in captured.err
    assert "Exception" not in captured.err.replace("EOFException", ""), "no Java traceback"
    problems = spark.read.parquet(str(out / "tables" / "input_problems"))
    assert problems.where("type = 'unreadable_files'").count() == 1


def test_a_malformed_share_above_the_threshold_has_its_own_exit_status(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = history(tmp_path, "p", events=1)
    for i in range(99):  # an unknown schema version
        log.raw(json.dumps({"v": 2, "ts": "2026-01-01T00:00:00Z", "n": i}))
    log.write()

    status = main(["analyze", str(log.path), "--out", str(tmp_path / "out"), "--quiet"])

    assert status == 8
    captured = capsys.readouterr()
    assert "99.0% of the lines are malformed (more than --max-malformed 1.0%)" in captured.err
    assert "no safety violations" in captured.out  # the verdict is printed, but does not pass
    assert main(["analyze", str(log.path), "--out", str(tmp_path / "out"), "--quiet", "--max-malformed", "1"]) == 0


def test_a_pattern_that_matches_nothing_is_an_error(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history(tmp_path, "p").write()
    status = main(["analyze", str(tmp_path / "p.jsonl"), str(tmp_path / "typo-*.jsonl"), "--out",
                   str(tmp_path / "out"), "--quiet"])
    assert status == 4
    assert f"no input files match {tmp_path / 'typo-*.jsonl'} (the other patterns do)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_line_without_v_is_version_1_and_coordinator_events_are_valid(spark: Any, tmp_path: Path) -> None:
    log = history(tmp_path, "p", events=2)
    legacy = {"ts": "2026-01-01T00:00:09.000000Z", "seq": 3, "process": "p", "namespace": "ns",
              "primitive": "group", "name": "g", "event": "left", "member": "m-p"}
    log.raw(json.dumps(legacy))
    # The group coordinator's rebalance events are valid events (for its own checks).
    log.add(10, "group_coordinator", "g", "assigned", member="m-p", generation=2, units=["u1"], protocol="eager")
    log.write()
    result = analyze(spark, [str(log.path)])
    try:
        assert (result.summary["inputs"]["events"], result.summary["inputs"]["malformed_lines"]) == (4, 0)
        assert result.summary["membership"]["leaves"] == 1
    finally:
        result.close()


def test_a_large_file_is_split_across_tasks_with_exact_line_numbers(
    spark: Any, tmp_path: Path, small_splits: None
) -> None:
    log = history(tmp_path, "p", events=300)  # ~75 KiB: dozens of splits
    bad = [log.raw("torn {") for _ in range(3)]
    for i in range(300, 400):
        log.group(float(i), "g", "renewed", "m-p")
    bad.append(log.raw(""))  # a blank line is ignored, and still counted as a line
    bad.append(log.raw("[]"))
    log.write()
    assert spark.read.text(str(log.path)).rdd.getNumPartitions() > 10

    result = analyze(spark, [str(log.path)])
    try:
        malformed = sorted((r["file"], r["line"]) for r in result.tables["malformed_lines"].collect())
        assert malformed == [where(log, n) for n in (bad[0], bad[1], bad[2], bad[4])]
        assert result.summary["inputs"]["events"] == 400
        lines = sorted(r["line"] for r in result.events.select("line").collect())
        assert lines == [n for n in range(1, 405) if n not in bad]
    finally:
        result.close()
