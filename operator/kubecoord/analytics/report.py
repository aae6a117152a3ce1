"""report.html and its plots: failover-gap CDF, leadership timeline per election, churn.

The only module that imports matplotlib (Agg backend: no display needed). The plots are
PNG files beside report.html, which shows them with <img>. Every time shown is UTC:
timestamps are rendered to text by Spark (session time zone UTC) or collected as UNIX
seconds and converted with an explicit UTC zone, never through the driver's local zone.

- The gap CDF is drawn from APPROX_QUANTILES approximate quantiles per cause computed
  over all gaps (percentile_approx), not from a sample, on a log axis so that
  sub-second gaps are visible next to expiry gaps of seconds.
- The timeline shows the elections with violations first (most first), then those with
  the longest gaps; overlaps are drawn in red across the lanes, and failovers shorter
  than a pixel are marked with ticks.
The tables and summary.json are never sampled.
"""

from __future__ import annotations

import datetime as dt
import html
import itertools
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from pyspark.sql import Window
from pyspark.sql import functions as F

from kubecoord.analytics.pipeline import Analysis

APPROX_QUANTILES = 200
TIMELINE_ELECTIONS = 6
TIMELINE_TERMS = 400
VIOLATION_ROWS = 100
ELECTION_ROWS = 50


def write(analysis: Analysis, out: Path) -> None:
    plots = [
        _gap_cdf(analysis, out / "failover_gap_cdf.png"),
        _timelines(analysis, out / "leadership_timeline.png"),
        _churn(analysis, out / "membership_churn.png"),
    ]
    (out / "report.html").write_text(_html(analysis, [p for p in plots if p]), encoding="utf-8")


def _utc(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def _num(moment: dt.datetime) -> float:
    return float(mdates.date2num(moment))  # type: ignore[no-untyped-call]


def _formatter(pattern: str) -> Any:
    return mdates.DateFormatter(pattern, tz=dt.UTC)  # type: ignore[no-untyped-call]


def _gap_cdf(analysis: Analysis, path: Path) -> str | None:
    fractions = [(i + 1) / APPROX_QUANTILES for i in range(APPROX_QUANTILES)]
    rows = analysis.tables["failover_gaps"].groupBy("cause").agg(
        F.count("*").alias("n"), F.percentile_approx("gap", fractions, 10_000).alias("q")
    ).orderBy("cause").collect()
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for row in rows:
        gaps = [max(g, 1e-4) for g in row["q"]]  # a log axis: zero and negative gaps at its floor
        ax.step(gaps, fractions, where="post", label=f"{row['cause']} ({row['n']})")
    ax.set_xscale("log")
    ax.set_xlabel("failover gap (s, log scale; ≤0.1 ms drawn at 0.1 ms)")
    ax.set_ylabel("fraction of failovers")
    ax.set_title(f"Failover gap CDF by cause ({APPROX_QUANTILES} approximate quantiles of all gaps)")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return _save(fig, path)


def timeline_elections(analysis: Analysis) -> list[tuple[str, str, int]]:
    """(namespace, name, violations) of the elections to draw: most violations first, then
    the longest gap."""
    rows = analysis.tables["elections"].orderBy(
        F.col("violations").desc(), F.col("gap_max").desc_nulls_last(), "namespace", "name"
    ).limit(TIMELINE_ELECTIONS).select("namespace", "name", "violations").collect()
    return [(r["namespace"], r["name"], r["violations"]) for r in rows]


def _timelines(analysis: Analysis, path: Path) -> str | None:
    elections = timeline_elections(analysis)
    if not elections:
        return None
    keys = [F.struct(F.lit(ns), F.lit(n)) for ns, n, _ in elections]
    chosen = F.struct("namespace", "name").isin(*keys)
    by_start = Window.partitionBy("namespace", "name").orderBy("start")
    terms = analysis.tables["leadership_intervals"]
    picked = (
        terms.filter(chosen).withColumn("n", F.row_number().over(by_start)).filter(F.col("n") <= TIMELINE_TERMS)
        .select("namespace", "name", "member", "epoch", "start", "end").collect()
    )
    overlaps = analysis.overlaps.filter(chosen).collect() if analysis.overlaps is not None else []
    fig, axes = plt.subplots(len(elections), 1, figsize=(10, 1.4 + 1.5 * len(elections)), squeeze=False)
    for ax, (namespace, name, bad) in zip(axes[:, 0], elections, strict=True):
        rows = sorted((r for r in picked if (r["namespace"], r["name"]) == (namespace, name)),
                      key=lambda r: r["start"])
        members = sorted({r["member"] for r in rows})
        for row in rows:
            lane = members.index(row["member"])
            start, end = _utc(row["start"]), _utc(max(row["end"], row["start"]))
            ax.barh(lane, _num(end) - _num(start), left=_num(start),
                    height=0.6, color="tab:blue")
        for before, after in itertools.pairwise(rows):
            if 0 <= after["start"] - before["end"] < 1.0:  # a sub-second failover: a tick, visible at any zoom
                ax.axvline(_num(_utc(after["start"])), color="tab:green", lw=0.6, alpha=0.6)
        for window in (w for w in overlaps if (w["namespace"], w["name"]) == (namespace, name)):
            ax.axvspan(_num(_utc(window["start"])), _num(_utc(window["end"])),
                       color="red", alpha=0.5, lw=1.5, ec="red")
        ax.set_yticks(range(len(members)), members, fontsize=7)
        title = f"{namespace}/{name}" + (f" — {bad} VIOLATION(S), overlaps in red" if bad else "")
        ax.set_title(title, fontsize=9, loc="left", color="#b00" if bad else "black")
        ax.xaxis.set_major_formatter(_formatter("%m-%d %H:%M:%S"))
    axes[-1, 0].set_xlabel("time (UTC); green ticks: failovers under 1 s")
    fig.suptitle("Leadership timeline (elections with violations first)")
    fig.autofmt_xdate()
    return _save(fig, path)


def _churn(analysis: Analysis, path: Path) -> str | None:
    rows = (
        analysis.tables["membership_churn"].groupBy("hour").agg(
            F.sum("joins").alias("joins"), F.sum("leaves").alias("leaves"), F.sum("expiries").alias("expiries")
        ).select(F.unix_seconds("hour").alias("hour"), "joins", "leaves", "expiries").orderBy("hour").collect()
    )
    if not rows:
        return None
    hours = [_num(_utc(r["hour"])) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    bottom = [0] * len(rows)
    for column in ("joins", "leaves", "expiries"):
        values = [r[column] for r in rows]
        ax.bar(hours, values, width=1 / 26, bottom=bottom, label=column, align="edge")
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.xaxis.set_major_formatter(_formatter("%m-%d %H:%M"))
    ax.set_xlabel("hour (UTC)")
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
    return str(value)


def _html(analysis: Analysis, plots: list[str]) -> str:
    s = analysis.summary
    found = s["violation_details"][:VIOLATION_ROWS]  # the first ones by time, already collected
    violation_rows = [
        {**row, "evidence": "; ".join(f"{e['file'].rsplit('/', 1)[-1]}:{e['line']} {e['event']}"
                                      for e in row["evidence"] if e is not None)}
        for row in found
    ]
    elections = [r.asDict() for r in analysis.tables["elections"].orderBy(
        F.col("violations").desc(), F.col("leaderless_seconds").desc(), "namespace", "name"
    ).limit(ELECTION_ROWS).collect()]
    top_conflicts = [
        r.asDict() for r in analysis.tables["kv_keys"].orderBy(F.col("conflicts").desc()).limit(20).collect()
    ]
    total = analysis.violation_count
    inputs, clocks, coverage, lead = s["inputs"], s["clocks"], s["coverage"], s["leadership"]
    verdict = "no safety violations" if total == 0 else f"{total} SAFETY VIOLATION(S)"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>kubecoord coordination report</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}.bad{color:#b00}.ok{color:#070}</style>",
        "</head><body><h1>kubecoord coordination report</h1><p>All times are UTC.</p>",
        f"<p class='{'ok' if total == 0 else 'bad'}'><b>{html.escape(verdict)}</b> — {inputs['events']} events "
        f"from {inputs['processes']} process(es) in {inputs['files']} file(s), "
        f"{inputs['first_event']} to {inputs['last_event']}; {inputs['malformed_lines']} malformed "
        f"line(s), {inputs['duplicates_dropped']} duplicate(s) dropped, {len(inputs['unreadable_files'])} "
        f"unreadable file(s).</p>",
        f"<p>Clocks: skew tolerance {clocks['tolerance_seconds']} s where the log has no evidence; the log proves "
        f"at least {clocks['estimated_skew_seconds']:.3f} s of skew between two processes "
        f"({clocks['pairs_with_evidence']} process pair(s) with causal evidence"
        f"{'; the evidence was inconsistent and was not used' if clocks['inconsistent_evidence'] else ''}).</p>",
        f"<p>Lost coverage: {coverage['missing_events']} event(s) missing in {coverage['seq_gaps']} seq gap(s) "
        f"of {coverage['processes_with_gaps']} process(es) — the checks cannot see what happened then.</p>",
        "<h2>Safety violations</h2>",
        _table([{"type": k, "count": v} for k, v in s["violations"].items()], ["type", "count"]),
        _table(violation_rows, ["type", "namespace", "name", "subject", "ts", "detail", "evidence"]) if found else "",
        "<h2>Leadership</h2>",
        f"<p>{lead['elections']} election(s), {lead['terms']} leadership term(s); time without a leader "
        f"(sum of failover gaps): {lead['leaderless_seconds']:.3f} s.</p>",
        "<h3>Failover gaps (seconds)</h3>",
        _table(lead["failover_gap_seconds"], ["group", "count", "p50", "p95", "p99", "max", "mean"]),
        "<h3>Worst failovers</h3>",
        _table(lead["worst_failovers"], ["namespace", "name", "cause", "from_member", "to_member", "gap",
                                         "from_end", "to_start"]),
        f"<h3>Per election (first {ELECTION_ROWS}: violations, then time without a leader)</h3>",
        _table(elections, ["namespace", "name", "terms", "failovers", "gap_p50_approx", "gap_max",
                           "leaderless_seconds", "violations"]),
        "<h2>Group membership</h2>",
        _table([s["membership"]], ["groups", "joins", "leaves", "expiries", "max_churn_per_hour"]),
        "<p>Heartbeat to expiry (seconds):</p>",
        _table(s["membership"]["heartbeat_to_expiry_seconds"], ["group", "count", "p50", "p95", "p99", "max"]),
        "<h2>KV stores</h2>",
        _table([s["kv"]], ["stores", "keys", "operations", "conflicts", "conflict_rate"]),
        _table(top_conflicts, ["namespace", "name", "key", "operations", "conflicts", "conflict_rate"]),
        "<h2>Plots</h2>",
        *(f"<p><img src='{html.escape(p)}' alt='{html.escape(p)}'></p>" for p in plots),
        "<h2>Input problems</h2>",
        _table(inputs["unreadable_files"], ["file", "reason"]),
        _table(coverage["largest_gaps"], ["process", "after_seq", "before_seq", "missing", "from", "to"]),
        _table(inputs["malformed_examples"], ["file", "line", "reason", "text"]),
        "</body></html>",
    ]
    return "\n".join(parts)
