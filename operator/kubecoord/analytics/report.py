"""report.html and its plots: failover-gap CDF, leadership timeline per election, churn.

The only module that imports matplotlib (Agg backend: no display needed). The plots are
PNG files beside report.html, which shows them with <img>. Large histories are sampled
for plotting (at most PLOT_ROWS gaps, TIMELINE_ELECTIONS elections of at most
TIMELINE_TERMS terms each); the tables and summary.json are never sampled.
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from pyspark.sql import Window
from pyspark.sql import functions as F

from kubecoord.analytics.pipeline import Analysis

PLOT_ROWS = 200_000
TIMELINE_ELECTIONS = 6
TIMELINE_TERMS = 400
VIOLATION_ROWS = 100


def write(analysis: Analysis, out: Path) -> None:
    plots = [
        _gap_cdf(analysis, out / "failover_gap_cdf.png"),
        _timelines(analysis, out / "leadership_timeline.png"),
        _churn(analysis, out / "membership_churn.png"),
    ]
    (out / "report.html").write_text(_html(analysis, [p for p in plots if p]), encoding="utf-8")


def _gap_cdf(analysis: Analysis, path: Path) -> str | None:
    rows = analysis.tables["failover_gaps"].select("cause", "gap").limit(PLOT_ROWS).collect()
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for cause in sorted({r["cause"] for r in rows}):
        gaps = sorted(r["gap"] for r in rows if r["cause"] == cause)
        ax.step(gaps, [(i + 1) / len(gaps) for i in range(len(gaps))], where="post", label=f"{cause} ({len(gaps)})")
    ax.set_xlabel("failover gap (s): end of one leadership to start of the next")
    ax.set_ylabel("fraction of failovers")
    ax.set_title("Failover gap CDF by cause")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def _timelines(analysis: Analysis, path: Path) -> str | None:
    terms = analysis.tables["leadership_intervals"]
    names = terms.select("namespace", "name").distinct().orderBy("namespace", "name").limit(TIMELINE_ELECTIONS)
    elections = [(r["namespace"], r["name"]) for r in names.collect()]
    if not elections:
        return None
    chosen = F.struct("namespace", "name").isin(*(F.struct(F.lit(ns), F.lit(n)) for ns, n in elections))
    by_start = Window.partitionBy("namespace", "name").orderBy("start")
    picked = (
        terms.filter(chosen).withColumn("n", F.row_number().over(by_start)).filter(F.col("n") <= TIMELINE_TERMS)
        .select("namespace", "name", "member", "start_ts", "end_ts").collect()
    )
    fig, axes = plt.subplots(len(elections), 1, figsize=(9, 1.2 + 1.3 * len(elections)), squeeze=False)
    for ax, (namespace, name) in zip(axes[:, 0], elections, strict=True):
        rows = [r for r in picked if (r["namespace"], r["name"]) == (namespace, name)]
        members = sorted({r["member"] for r in rows})
        for row in rows:
            lane = members.index(row["member"])
            start, end = row["start_ts"], row["end_ts"]
            ax.barh(lane, (end - start).total_seconds() / 86400, left=start, height=0.6)
        ax.set_yticks(range(len(members)), members, fontsize=7)
        ax.set_title(f"{namespace}/{name}", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time (UTC)")
    fig.suptitle("Leadership timeline per election (who led when)")
    return _save(fig, path)


def _churn(analysis: Analysis, path: Path) -> str | None:
    rows = (
        analysis.tables["membership_churn"].groupBy("hour").agg(
            F.sum("joins").alias("joins"), F.sum("leaves").alias("leaves"), F.sum("expiries").alias("expiries")
        ).orderBy("hour").collect()
    )
    if not rows:
        return None
    hours = [r["hour"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    bottom = [0] * len(rows)
    for column in ("joins", "leaves", "expiries"):
        values = [r[column] for r in rows]
        ax.bar(hours, values, width=1 / 26, bottom=bottom, label=column, align="edge")
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("membership changes per hour")
    ax.set_title("Group churn over time (all groups)")
    ax.legend()
    fig.autofmt_xdate()
    return _save(fig, path)


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path.name


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(row.get(c)))}</td>" for c in columns) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _html(analysis: Analysis, plots: list[str]) -> str:
    s = analysis.summary
    found = analysis.tables["violations"].orderBy("ts").limit(VIOLATION_ROWS).collect()
    violation_rows = [
        {**row.asDict(), "evidence": "; ".join(f"{e['file'].rsplit('/', 1)[-1]}:{e['line']} {e['event']}"
                                               for e in row["evidence"] if e is not None)}
        for row in found
    ]
    top_conflicts = [
        r.asDict() for r in analysis.tables["kv_keys"].orderBy(F.col("conflicts").desc()).limit(20).collect()
    ]
    total = analysis.violation_count
    verdict = "no safety violations" if total == 0 else f"{total} SAFETY VIOLATION(S)"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>kubecoord coordination report</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}.bad{color:#b00}.ok{color:#070}</style>",
        "</head><body><h1>kubecoord coordination report</h1>",
        f"<p class='{'ok' if total == 0 else 'bad'}'><b>{html.escape(verdict)}</b> — {s['inputs']['events']} events "
        f"from {s['inputs']['processes']} process(es) in {s['inputs']['files']} file(s), "
        f"{s['inputs']['first_event']} to {s['inputs']['last_event']}; {s['inputs']['malformed_lines']} malformed "
        f"line(s); clock-skew tolerance {s['skew_tolerance_seconds']} s.</p>",
        "<h2>Safety violations</h2>",
        _table([{"type": k, "count": v} for k, v in s["violations"].items()], ["type", "count"]),
        _table(violation_rows, ["type", "namespace", "name", "subject", "ts", "detail", "evidence"]) if found else "",
        "<h2>Failover gaps (seconds)</h2>",
        _table(s["leadership"]["failover_gap_seconds"], ["group", "count", "p50", "p95", "p99", "max", "mean"]),
        f"<p>{s['leadership']['elections']} election(s), {s['leadership']['terms']} leadership term(s).</p>",
        "<h2>Group membership</h2>",
        _table([s["membership"]], ["groups", "joins", "leaves", "expiries", "max_churn_per_hour"]),
        "<p>Heartbeat to expiry (seconds):</p>",
        _table(s["membership"]["heartbeat_to_expiry_seconds"], ["group", "count", "p50", "p95", "p99", "max"]),
        "<h2>KV stores</h2>",
        _table([s["kv"]], ["stores", "keys", "operations", "conflicts", "conflict_rate"]),
        _table(top_conflicts, ["namespace", "name", "key", "operations", "conflicts", "conflict_rate"]),
        "<h2>Plots</h2>",
        *(f"<p><img src='{html.escape(p)}' alt='{html.escape(p)}'></p>" for p in plots),
        "<h2>Malformed lines</h2>",
        _table(s["malformed_examples"], ["file", "line", "reason", "text"]),
        "</body></html>",
    ]
    return "\n".join(parts)
