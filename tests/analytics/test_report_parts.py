"""The report's pure parts (issue 23): time bins that fit the history, the faults file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubecoord.analytics.faults import category, read_faults
from kubecoord.errors import InvalidArgumentError


def test_time_bins_fit_the_history_length() -> None:
    from kubecoord.analytics.drawing import TIME_BINS, bin_seconds

    assert bin_seconds(60) == 1  # a one-minute soak: one-second bins, not one hourly bar
    assert bin_seconds(600) == 10
    assert bin_seconds(1.5 * 3600) == 120
    assert bin_seconds(24 * 3600) == 1800
    assert bin_seconds(365 * 86400) == 86400
    for span in (1, 59, 61, 3599, 3601, 86399, 200_000):
        assert span / bin_seconds(span) <= TIME_BINS or bin_seconds(span) == 86400


def test_faults_are_read_sorted_and_categorised(tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    entries = [
        {"at": 5.0, "ts": 1_767_225_610.0, "kind": "sigstop_pause", "duration": 4.0, "what": "w2"},
        {"at": 1.0, "ts": 1_767_225_601.5, "kind": "kill9_leader", "duration": 0, "what": "pod-0"},
        {"at": 9.0, "ts": 1_767_225_620.0, "kind": "proxy_hold", "duration": 6.0, "what": "all"},
        {"at": 9.0, "ts": 1_767_225_630.0, "kind": "zookeeper_delete_store", "duration": 0, "what": "s"},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + "\n")
    faults = read_faults([path])
    assert [(f["kind"], f["category"]) for f in faults] == [
        ("kill9_leader", "kill"), ("sigstop_pause", "pause"), ("proxy_hold", "partition"),
        ("zookeeper_delete_store", "deletion")]
    assert category("restart_member") == "restart" and category("something_else") == "other"


def test_a_broken_faults_file_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    path.write_text('{"ts": 1, "kind": "kill9_leader"}\n{"kind": "proxy_hold"}\n')
    with pytest.raises(InvalidArgumentError, match=r"faults.jsonl:2: not a fault record"):
        read_faults([path])
    with pytest.raises(InvalidArgumentError, match="cannot read the faults file"):
        read_faults([tmp_path / "missing.jsonl"])


def test_the_clock_sentence_claims_only_what_the_log_shows() -> None:
    from kubecoord.analytics.report import clock_sentence

    base = {"tolerance_seconds": 1.0, "inconsistent_evidence": False}
    none = clock_sentence({**base, "pairs_with_evidence": 0, "estimated_skew_seconds": 0.0})
    assert "no process pair has causal evidence" in none and "0.000" not in none
    zero = clock_sentence({**base, "pairs_with_evidence": 3, "estimated_skew_seconds": 0.0})
    assert "none showing clock skew" in zero and "at least" not in zero
    some = clock_sentence({**base, "pairs_with_evidence": 2, "estimated_skew_seconds": 0.25})
    assert "at least 0.250 s apart" in some
    odd = clock_sentence({**base, "inconsistent_evidence": True, "pairs_with_evidence": 2,
                          "estimated_skew_seconds": 1.0})
    assert "inconsistent" in odd and "at least" not in odd
