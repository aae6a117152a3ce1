"""``kubecoord analyze`` end to end on generated histories: outputs, exit status, empty input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubecoord.cli import main
from kubecoord.wire.events import VIOLATION_TYPES
from kubecoord_testkit.history_generator import Spec, generate

from . import golden

TABLES = ("violations", "intervals", "metrics", "input_problems")  # analytics.layout


def test_injected_violations_are_found_and_gate_the_exit_status(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = Spec(elections=3, groups=2, stores=2, hours=1.5, gzip=True, malformed=4,
                inject={kind: 1 for kind in VIOLATION_TYPES})
    manifest = generate(tmp_path / "logs", spec)
    out = tmp_path / "report"

    faults = tmp_path / "faults.jsonl"  # a soak's record: drawn on the timelines, listed in the report
    faults.write_text(json.dumps({"ts": 1_767_225_900.0, "kind": "sigstop_pause", "duration": 5.0, "what": "w1"}))

    status = main(["analyze", str(tmp_path / "logs" / "*.jsonl.gz"), "--out", str(out), "--quiet",
                   "--faults", str(faults)])

    assert status == 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["violations"] == manifest.injected
    assert summary["inputs"]["events"] == manifest.events
    assert summary["inputs"]["malformed_lines"] == manifest.malformed == 4
    assert f"{len(VIOLATION_TYPES)} SAFETY VIOLATION(S)" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(TABLES)
    assert spark.read.parquet(str(out / "tables" / "violations")).count() == len(VIOLATION_TYPES)
    html = (out / "report.html").read_text()
    for plot in ("failover_gap_cdf.png", "leadership_timeline.png", "membership_churn.png", "overlaps.png",
                 "rebalances.png"):
        assert f"src='{plot}'" in html
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "SAFETY VIOLATION" in html and "lost_update" in html
    assert "<h2>Rebalances</h2>" in html and "<h2>Faults</h2>" in html and "sigstop_pause" in html
    # Each plot inside the section it explains, with its caption; a stylesheet; no empty claims.
    sections = {"overlaps.png": ("<h2>Safety violations</h2>", "<h2>Leadership</h2>"),
                "failover_gap_cdf.png": ("<h2>Leadership</h2>", "<h2>Group membership</h2>"),
                "leadership_timeline.png": ("<h2>Leadership</h2>", "<h2>Group membership</h2>"),
                "membership_churn.png": ("<h2>Group membership</h2>", "<h2>KV stores</h2>"),
                "rebalances.png": ("<h2>Rebalances</h2>", "<h2>Faults</h2>")}
    for plot, (start, end) in sections.items():
        assert html.index(start) < html.index(f"src='{plot}'") < html.index(end), plot
    assert html.count("<figcaption>") == len(sections) and "<style>" in html and "<h2>Plots</h2>" not in html
    assert "at least 0.000 s" not in html
    golden.check("injected", golden.snapshot_output(spark, out, tmp_path / "logs"))


def test_a_clean_history_exits_zero_and_replaces_the_previous_output(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    manifest = generate(tmp_path / "logs", Spec(elections=2, groups=1, stores=1, hours=0.5, seed=7))
    out = tmp_path / "out [1]"  # written where asked: brackets and spaces are not percent-encoded
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run")

    # The command runs in this process's session, as in a notebook: the caller's settings
    # and job description must come back, the command's (UTC, partitions...) must not stay.
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    spark.sparkContext.setJobDescription("the caller's job")
    before = spark.conf.getAll
    try:
        status = main(["analyze", str(tmp_path / "logs"), "--out", str(out), "--quiet", "--skew-tolerance", "0.5"])
        assert spark.conf.getAll == before
        assert spark.sparkContext.getLocalProperty("spark.job.description") == "the caller's job"
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        spark.sparkContext.setJobDescription(None)

    assert status == 0
    captured = capfd.readouterr()  # file descriptors: what the JVM writes is seen too
    assert "no safety violations" in captured.out
    assert captured.err == "", "quiet run: no progress lines and no JVM log lines"
    assert not (out / "stale.txt").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inputs"]["events"] == manifest.events  # _manifest.json itself is skipped
    assert summary["skew_tolerance_seconds"] == 0.5
    gaps = {row["group"]: row for row in summary["leadership"]["failover_gap_seconds"]}
    assert gaps["all"]["count"] > 0 and gaps["all"]["max"] < spec_bound()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")], "no staging directory left behind"
    golden.check("clean", golden.snapshot_output(spark, out, tmp_path / "logs"))


def spec_bound() -> float:
    """The generator's largest failover gap: renew interval (2 s) plus skew on both sides."""
    spec = Spec()
    return spec.renew + 2 * spec.skew


def test_no_matching_file_is_an_empty_input(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["analyze", str(tmp_path / "nothing-*.jsonl"), "--out", str(tmp_path / "out"), "--quiet"])
    assert status == 4
    assert "empty input: no input files match" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_only_malformed_lines_is_an_empty_input(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.jsonl").write_text("garbage\n{}\n")
    status = main(["analyze", str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "out"), "--quiet"])
    assert status == 4
    assert "no valid events in 1 file(s) (2 malformed line(s))" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_setting_the_embedding_session_cannot_take_is_refused_and_changes_nothing(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generate(tmp_path / "logs", Spec(elections=1, groups=0, stores=0, hours=0.01))
    before = spark.conf.getAll

    status = main(["analyze", str(tmp_path / "logs"), "--out", str(tmp_path / "out"), "--quiet",
                   "--conf", "spark.sql.shuffle.partitions=7", "--conf", "spark.sql.warehouse.dir=/elsewhere"])

    assert status == 1
    assert "--conf spark.sql.warehouse.dir: the running Spark session" in capsys.readouterr().err
    assert spark.conf.getAll == before  # the partitions set before the refusal are put back
    assert not (tmp_path / "out").exists()
