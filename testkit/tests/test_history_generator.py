"""The synthetic history generator (no Spark): deterministic, counted, injections checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubecoord.errors import InvalidArgumentError
from kubecoord_testkit.history_generator import Spec, generate


def lines(root: Path) -> list[str]:
    return [line for path in sorted(root.glob("node-*.jsonl")) for line in path.read_text().splitlines()]


def test_same_seed_same_history_and_the_manifest_counts_it(tmp_path: Path) -> None:
    spec = Spec(elections=2, groups=1, stores=1, hours=0.25, seed=3, malformed=2)
    first = generate(tmp_path / "a", spec)
    second = generate(tmp_path / "b", spec)
    assert lines(tmp_path / "a") == lines(tmp_path / "b")
    assert len(lines(tmp_path / "a")) == first.events + 2 == second.events + 2
    manifest = json.loads((tmp_path / "a" / "_manifest.json").read_text())
    assert manifest["events"] == first.events and manifest["malformed"] == 2
    assert first.files == [f"node-{i}.jsonl" for i in range(5)]


def test_each_process_logs_in_its_own_time_order(tmp_path: Path) -> None:
    generate(tmp_path, Spec(elections=3, groups=1, stores=1, hours=0.25))
    for path in tmp_path.glob("node-*.jsonl"):
        events = [json.loads(line) for line in path.read_text().splitlines()]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
        assert {e["process"] for e in events} == {path.name.removesuffix(".jsonl")}


def test_unknown_injection_and_too_short_histories_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown violation type"):
        generate(tmp_path / "x", Spec(inject={"split_brain": 1}))
    with pytest.raises(InvalidArgumentError, match="too short to inject"):
        generate(tmp_path / "y", Spec(elections=1, groups=0, stores=0, hours=0.01, inject={"lost_update": 1}))
    with pytest.raises(InvalidArgumentError, match="at least 3 processes"):
        generate(tmp_path / "z", Spec(processes=2))
