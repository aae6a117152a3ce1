"""A soak worker on its own: its clock fault shows in its log, SIGTERM ends it cleanly."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import signal
import subprocess
import sys
import time

from kubecoord_testkit.soak import verdict
from tests.helpers import eventually


def events(path: pathlib.Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stamp(event: dict[str, object]) -> float:
    return dt.datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def test_clock_offset_and_jump_shift_the_log_timestamps(tmp_path: pathlib.Path, zookeeper_url: str) -> None:
    log = tmp_path / "c1.jsonl"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubecoord_testkit.soak.worker",
            "candidate",
            "--url",
            zookeeper_url,
            "--id",
            "c1",
            "--name",
            "e",
            "--history",
            str(log),
            "--clock-offset=30",
            "--clock-jumps=-30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        eventually(lambda: any(e["event"] == "acquired" for e in events(log)), timeout=60)
        acquired = next(e for e in events(log) if e["event"] == "acquired")
        assert 25 < stamp(acquired) - time.time() < 35  # thirty seconds ahead, as a skewed host
        process.send_signal(signal.SIGUSR1)  # the clock steps to 30 s behind
        time.sleep(1.0)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    last = events(log)[-1]
    assert last["event"] in ("resigned", "lost")  # SIGTERM closed the coordinator
    assert 25 < time.time() - stamp(last) < 35


def test_figures_from_a_pipeline_summary() -> None:
    summary = {
        "inputs": {"events": 10},
        "violations": {"overlapping_leadership": 0, "lost_update": 0},
        "leadership": {
            "elections": 2,
            "terms": 9,
            "failover_gap_seconds": [
                {"group": "all", "count": 7, "p50": 0.5, "p95": 1.5, "p99": 2.0, "max": 2.1, "mean": 0.7}
            ],
        },
        "kv": {"operations": 400, "conflicts": 12},
        "membership": {"joins": 5, "leaves": 4, "expiries": 1},
        "rebalance": {"groups": 1, "rebalances": 6, "duration_seconds": [{"group": "all", "count": 6, "p50": 0.1}]},
    }
    figures = verdict.figures(summary)
    assert figures["rebalances"] == 6
    assert figures["leadership_changes"] == 7 and figures["lost_updates"] == 0 and figures["kv_operations"] == 400
    assert verdict.format_gaps(figures["failover_gap_seconds"]) == "all: n=7 p50 0.50s p95 1.50s p99 2.00s max 2.10s"
    assert verdict.format_gaps([]) == "none measured"
