"""After a soak: the pipeline over every process's log, and the figures a person reads.

The pipeline runs as ``kubecoord analyze`` in a child process (its JVM lives and dies
there); its summary.json gives the violations and the figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Verdict:
    analyze_status: int
    summary: dict[str, Any]
    report: Path
    stderr: str

    @property
    def violations(self) -> dict[str, int]:
        return {kind: int(count) for kind, count in (self.summary.get("violations") or {}).items() if count}


def analyze(
    logs: list[Path], out: Path, *, skew: float, timeout: float = 1800, faults: list[Path] | None = None
) -> Verdict:
    """``faults``: the soak's faults.jsonl files, drawn on the report's timelines."""
    drawn = [x for path in faults or [] if path.exists() for x in ("--faults", str(path))]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubecoord.cli",
            "analyze",
            *map(str, logs),
            "--out",
            str(out),
            "--skew-tolerance",
            str(skew),
            "--quiet",
            *drawn,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() and result.returncode in (0, 3) else {}
    return Verdict(result.returncode, summary, out / "report.html", result.stderr + result.stdout)


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures the soak prints, from the pipeline's summary (absent ones as None)."""
    leadership = summary.get("leadership") or {}
    kv = summary.get("kv") or {}
    membership = summary.get("membership") or {}
    violations = summary.get("violations") or {}
    rebalance = summary.get("rebalance") or {}
    terms = leadership.get("terms")
    return {
        "events": (summary.get("inputs") or {}).get("events"),
        "leadership_terms": terms,
        "leadership_changes": max(0, terms - leadership.get("elections", 1)) if isinstance(terms, int) else None,
        "failover_gap_seconds": leadership.get("failover_gap_seconds"),
        "kv_operations": kv.get("operations"),
        "kv_conflicts": kv.get("conflicts"),
        "lost_updates": violations.get("lost_update"),
        "membership": {key: membership.get(key) for key in ("joins", "leaves", "expiries")},
        "rebalances": rebalance.get("rebalances"),
        "rebalance_seconds": rebalance.get("duration_seconds"),
    }


def format_gaps(gaps: Any) -> str:
    """The pipeline's percentile rows (by cause) as 'cause: n=.. p50 .. p95 .. p99 .. max ..'."""
    if not gaps:
        return "none measured"
    rows = gaps if isinstance(gaps, list) else [dict(gaps, cause="all")] if isinstance(gaps, dict) else []
    parts = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        cause = row.get("group", row.get("cause", "all"))
        values = " ".join(
            f"{key} {row[key]:.2f}s" for key in ("p50", "p95", "p99", "max") if isinstance(row.get(key), int | float)
        )
        count = row.get("count", row.get("n"))
        parts.append(f"{cause}: n={count} {values}".strip())
    return "; ".join(parts) or json.dumps(gaps)
