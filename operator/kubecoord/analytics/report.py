"""report.html and its plots: failover-gap CDF, leadership timeline per election, churn.

The only module that imports matplotlib (Agg backend: no display needed). The plots are
PNG files beside report.html, which shows each inside the section it explains (the
overlaps under the safety violations, the gap CDF and the timeline under leadership, the
churn under membership, the rebalances under rebalances), with a caption saying how to
read it; the page is styled by its own stylesheet (no file to fetch). Every time shown is UTC:
timestamps are rendered to text by Spark (session time zone UTC) or collected as UNIX
seconds and converted with an explicit UTC zone, never through the driver's local zone.

- The gap CDF is drawn from APPROX_QUANTILES approximate quantiles per cause computed
  over all gaps (percentile_approx), not from a sample, on a log axis so that
  sub-second gaps are visible next to expiry gaps of seconds.
- The timeline shows the elections with violations first (most first), then those with
  the longest gaps; overlaps are drawn in red across the lanes, at least
  MIN_MARK_SHARE of the axis wide and marked with a triangle above the lanes (a 3 s
  overlap in a 2 h history is otherwise a hairline), and failovers shorter than a pixel
  are marked with ticks.
- Each overlap (the longest OVERLAP_PLOTS) is drawn on its own: the two holders' terms as
  two named bars (member and epoch), zoomed on the overlap, which is shaded.
- Faults of a soak (Analysis.faults, ``--faults``) are drawn on every timeline as bands
  coloured by category (kill, pause, partition, restart, deletion, clock), so a gap or a
  violation can be read against the fault before it.
- Rebalances: per group the generations, rebalance durations and units moved (a unit
  whose previous holder was another member), with a plot over time.
- Time bins fit the history: a bin width from 1 s to 1 day giving at most TIME_BINS bins.
The tables and summary.json are never sampled. What is drawn was collected with the
summary (Analysis.drawn, from analytics.drawing's queries): this module runs no Spark query.
"""

from __future__ import annotations

import datetime as dt
import html
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.patches import Patch
from pyspark.sql import Row

from kubecoord.analytics.drawing import APPROX_QUANTILES, ELECTION_ROWS, PREFIX, bin_seconds, span
from kubecoord.analytics.pipeline import Analysis

VIOLATION_ROWS = 100
MIN_MARK_SHARE = 0.005
"""The narrowest an overlap is drawn on the timeline, as a share of the axis: 5 px of 1000."""
REBALANCE_GROUPS = 6
FAULT_COLOURS = {"kill": "tab:purple", "pause": "tab:orange", "partition": "tab:brown", "restart": "tab:gray",
                 "deletion": "tab:olive", "clock": "tab:cyan", "other": "tab:pink"}


CAPTIONS = {
    "overlaps.png": "Each overlap at its own zoom: the earlier and the later holder's terms, the overlap "
                    "shaded red.",
    "failover_gap_cdf.png": "Failover gaps by cause (log scale): the share of failovers faster than each gap.",
    "leadership_timeline.png": "Who led when, per election: blue terms per member, overlaps in red (widened to "
                               "be visible, and marked with a triangle), green ticks for failovers under 1 s.",
    "membership_churn.png": "Joins, leaves and expiries over time.",
    "rebalances.png": "Per coordinated group: rebalance durations and units moved over time.",
}
"""What each plot shows, under it in the report."""


def write(analysis: Analysis, out: Path) -> None:
    rows = _drawn(analysis)
    elections = _timeline_elections(rows["timeline"])
    drawn = {"terms": rows["terms"], "overlaps": rows.get("timeline_overlaps", [])}
    rebalances = _rebalance_rows(rows["rebalances"])
    plots = {
        "violations": [_overlaps(analysis, rows.get("overlaps", []), out / "overlaps.png")],
        "leadership": [_gap_cdf(rows["gap_cdf"], out / "failover_gap_cdf.png"),
                       _timelines(analysis, elections, drawn, out / "leadership_timeline.png")],
        "membership": [_churn(analysis, rows["churn"], out / "membership_churn.png")],
        "rebalances": [_rebalances(analysis, rebalances, out / "rebalances.png")],
    }
    drawn_plots = {section: [p for p in found if p] for section, found in plots.items()}
    (out / "report.html").write_text(
        _html(analysis, drawn_plots, rebalances, rows["elections"], rows["conflicts"]), encoding="utf-8")


def _drawn(analysis: Analysis) -> dict[str, list[Row]]:
    """The report's rows by drawing's query names (without PREFIX)."""
    return {name.removeprefix(PREFIX): found for name, found in analysis.drawn.items()}


def _span(analysis: Analysis) -> tuple[float, float]:
    inputs = analysis.summary["inputs"]
    return span(inputs["first_event"], inputs["last_event"])


def _draw_faults(ax: Any, faults: list[dict[str, Any]], lo: float, hi: float) -> set[str]:
    """Bands for the faults between ``lo`` and ``hi`` (UNIX seconds); the categories drawn."""
    drawn: set[str] = set()
    for fault in faults:
        start, end = fault["ts"], fault["ts"] + fault["duration"]
        if end < lo or start > hi:
            continue
        end = max(end, start + (hi - lo) / 400)  # an instant fault: a thin band, still visible
        ax.axvspan(_num(_utc(start)), _num(_utc(end)), color=FAULT_COLOURS[fault["category"]], alpha=0.35, lw=0)
        drawn.add(fault["category"])
    return drawn


def _fault_legend(fig: Any, drawn: set[str]) -> None:
    if drawn:
        handles = [Patch(color=FAULT_COLOURS[c], alpha=0.35, label=f"fault: {c}") for c in sorted(drawn)]
        fig.legend(handles=handles, loc="lower center", fontsize=7, ncol=len(handles), frameon=False)


def _utc(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def _num(moment: dt.datetime) -> float:
    return float(mdates.date2num(moment))  # type: ignore[no-untyped-call]


def _formatter(pattern: str) -> Any:
    return mdates.DateFormatter(pattern, tz=dt.UTC)  # type: ignore[no-untyped-call]


def _gap_cdf(found: list[Row], path: Path) -> str | None:
    fractions = [(i + 1) / APPROX_QUANTILES for i in range(APPROX_QUANTILES)]
    rows = sorted(found, key=lambda row: str(row["cause"]))
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
    return _timeline_elections(_drawn(analysis)["timeline"])


def _timeline_elections(rows: list[Row]) -> list[tuple[str, str, int]]:
    return [(r["namespace"], r["name"], r["violations"]) for r in rows]


def _timelines(analysis: Analysis, elections: list[tuple[str, str, int]], drawn_rows: Mapping[str, list[Row]],
               path: Path) -> str | None:
    if not elections:
        return None
    picked = drawn_rows["terms"]
    overlaps = drawn_rows.get("overlaps", [])
    fig, axes = plt.subplots(len(elections), 1, figsize=(10, 1.4 + 1.5 * len(elections)), squeeze=False)
    drawn: set[str] = set()
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
        windows = [w for w in overlaps if (w["namespace"], w["name"]) == (namespace, name)]
        if rows and windows:
            first = min(min(r["start"] for r in rows), *(w["start"] for w in windows))
            last = max(max(r["end"] for r in rows), *(w["end"] for w in windows))
            least = (last - first) * MIN_MARK_SHARE
            for window in windows:
                middle = (window["start"] + window["end"]) / 2
                half = max(window["end"] - window["start"], least) / 2
                ax.axvspan(_num(_utc(middle - half)), _num(_utc(middle + half)), color="red", alpha=0.5, lw=0)
                ax.plot([_num(_utc(middle))], [len(members) - 0.3], marker="v", color="red", markersize=7)
        if rows:
            drawn |= _draw_faults(ax, analysis.faults, min(r["start"] for r in rows), max(r["end"] for r in rows))
        ax.set_yticks(range(len(members)), members, fontsize=7)
        title = f"{namespace}/{name}" + (f" — {bad} VIOLATION(S), overlaps in red" if bad else "")
        ax.set_title(title, fontsize=9, loc="left", color="#b00" if bad else "black")
        ax.xaxis.set_major_formatter(_formatter("%m-%d %H:%M:%S"))
    axes[-1, 0].set_xlabel("time (UTC); green ticks: failovers under 1 s")
    fig.suptitle("Leadership timeline (elections with violations first, then the longest failover gaps)")
    fig.autofmt_xdate()
    _fault_legend(fig, drawn)
    return _save(fig, path)


def _overlaps(analysis: Analysis, rows: list[Row], path: Path) -> str | None:
    """The longest overlaps, each as the two holders' terms (named bars) with the overlap shaded."""
    if analysis.overlaps is None or not rows:
        return None
    fig, axes = plt.subplots(len(rows), 1, figsize=(9, 0.6 + 1.6 * len(rows)), squeeze=False)
    drawn: set[str] = set()
    for ax, row in zip(axes[:, 0], rows, strict=True):
        length = row["end"] - row["start"]
        pad = max(3 * length, 2.0)
        lo, hi = row["start"] - pad, row["end"] + pad
        holders = [(row["second_member"], row["second_epoch"], row["second_start"], row["second_end"], "tab:green"),
                   (row["first_member"], row["first_epoch"], row["first_start"], row["first_end"], "tab:blue")]
        for lane, (member, epoch, start, end, colour) in enumerate(holders):
            left, right = max(start, lo), min(max(end, start), hi)
            ax.barh(lane, _num(_utc(right)) - _num(_utc(left)), left=_num(_utc(left)), height=0.5, color=colour)
            edges = ("… " if start < lo else "") + f"{member} (epoch {epoch})" + (" …" if end > hi else "")
            ax.text(_num(_utc(left)), lane + 0.32, edges, fontsize=8, va="bottom")
        ax.axvspan(_num(_utc(row["start"])), _num(_utc(row["end"])), color="red", alpha=0.3, lw=0)
        ax.text(_num(_utc(row["end"])), -0.45, f" {length:.3f} s of overlap", fontsize=8, color="#b00")
        drawn |= _draw_faults(ax, analysis.faults, lo, hi)
        ax.set_xlim(_num(_utc(lo)), _num(_utc(hi)))
        ax.set_ylim(-0.6, 1.9)
        ax.set_yticks([0, 1], [f"{holders[0][0]} (later)", f"{holders[1][0]} (earlier)"], fontsize=7)
        ax.set_title(f"{row['namespace']}/{row['name']}", fontsize=9, loc="left", color="#b00")
        ax.xaxis.set_major_formatter(_formatter("%H:%M:%S"))
    axes[-1, 0].set_xlabel("time (UTC); the overlap shaded red")
    fig.suptitle("Overlapping leadership: both holders' terms")
    _fault_legend(fig, drawn)
    return _save(fig, path)


def _churn_width(analysis: Analysis) -> int:
    first, last = _span(analysis)
    return bin_seconds(last - first)


def _churn(analysis: Analysis, rows: list[Row], path: Path) -> str | None:
    first, last = _span(analysis)
    width = _churn_width(analysis)
    if not rows:
        return None
    bins = sorted({int(r["bin"]) for r in rows})
    counts = {(int(r["bin"]), r["kind"]): r["count"] for r in rows}
    fig, ax = plt.subplots(figsize=(8, 3.5))
    bottom = [0] * len(bins)
    for column in ("joins", "leaves", "expiries"):
        values = [counts.get((b, column), 0) for b in bins]
        ax.bar([_num(_utc(b)) for b in bins], values, width=width / 86400 * 0.9, bottom=bottom, label=column,
               align="edge")
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    drawn = _draw_faults(ax, analysis.faults, first, last)
    ax.xaxis.set_major_formatter(_formatter("%m-%d %H:%M" if width >= 60 else "%H:%M:%S"))
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel(f"membership changes per {_duration(width)}")
    ax.set_title(f"Group churn over time (all groups, {_duration(width)} bins)")
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    _fault_legend(fig, drawn)
    return _save(fig, path)


def _duration(seconds: int) -> str:
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _rebalance_rows(rows: list[Row]) -> list[dict[str, Any]]:
    """drawing's rebalance rows (one per group and generation) by group and generation."""
    ordered = sorted(rows, key=lambda r: (r["namespace"], r["name"], r["generation"]))
    return [{**r.asDict(), "started": r["started_us"] / 1e6} for r in ordered]


def _rebalance_groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["namespace"], row["name"]), []).append(row)
    summary = []
    for (namespace, name), found in sorted(groups.items()):
        durations = sorted(r["duration"] for r in found)
        summary.append({
            "namespace": namespace, "name": name, "rebalances": len(found),
            "generations": f"{found[0]['generation']} to {found[-1]['generation']}",
            "duration_p50": durations[len(durations) // 2], "duration_max": durations[-1],
            "units_moved": sum(r["units_moved"] for r in found),
        })
    return summary


def _rebalances(analysis: Analysis, rows: list[dict[str, Any]], path: Path) -> str | None:
    if not rows:
        return None
    groups = _rebalance_groups(rows)[:REBALANCE_GROUPS]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    for group in groups:
        found = [r for r in rows if (r["namespace"], r["name"]) == (group["namespace"], group["name"])]
        times = [_num(_utc(r["started"])) for r in found]
        label = f"{group['namespace']}/{group['name']}"
        top.plot(times, [max(r["duration"], 1e-3) for r in found], "o-", ms=3, lw=0.8, label=label)
        bottom.plot(times, [r["units_moved"] for r in found], "s", ms=3, label=label)
    first, last = min(r["started"] for r in rows), max(r["started"] + r["duration"] for r in rows)
    drawn = _draw_faults(top, analysis.faults, first, last) | _draw_faults(bottom, analysis.faults, first, last)
    top.set_yscale("log")
    top.set_ylabel("duration (s, log)")
    top.set_title("Rebalances: duration and units moved, per generation", fontsize=10)
    top.legend(fontsize=7)
    bottom.set_ylabel("units moved")
    bottom.set_xlabel("rebalance start (UTC)")
    bottom.xaxis.set_major_formatter(_formatter("%m-%d %H:%M:%S"))
    fig.autofmt_xdate()
    _fault_legend(fig, drawn)
    return _save(fig, path)


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout(rect=(0, 0.05 if fig.legends else 0, 1, 1))  # room for the faults' legend below
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


STYLE = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;max-width:1100px;margin:2em auto;
padding:0 1.5em}
h1{font-size:1.7em;margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em;margin-top:1.4em}
.verdict{padding:.8em 1em;border-radius:6px;font-size:1.1em}
.verdict.ok{background:#e8f5e9;border-left:6px solid #2e7d32}
.verdict.bad{background:#fdecea;border-left:6px solid #c62828}
table{border-collapse:collapse;margin:.8em 0;font-size:13px}
th{background:#f3f3f3;text-align:left}td,th{border:1px solid #ddd;padding:3px 8px;vertical-align:top}
tr:nth-child(even) td{background:#fafafa}
figure{margin:1.2em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:13px}.note{color:#555}
"""


def _figures(plots: list[str]) -> str:
    return "".join(
        f"<figure><img src='{html.escape(p)}' alt='{html.escape(CAPTIONS.get(p, p))}'>"
        f"<figcaption>{html.escape(CAPTIONS.get(p, p))}</figcaption></figure>"
        for p in plots
    )


def clock_sentence(clocks: dict[str, Any]) -> str:
    """What the log says about clock skew, in words that claim only what it shows."""
    pairs, skew = clocks["pairs_with_evidence"], clocks["estimated_skew_seconds"]
    tolerance = f"a skew tolerance of {clocks['tolerance_seconds']} s applies where the log has no evidence"
    if clocks["inconsistent_evidence"]:
        return f"Clocks: the causal evidence between processes was inconsistent and was not used; {tolerance}."
    if not pairs:
        return f"Clocks: no process pair has causal evidence to measure skew by; {tolerance}."
    if skew <= 0:
        return f"Clocks: {pairs} process pair(s) with causal evidence, none showing clock skew; {tolerance}."
    return (f"Clocks: the causal order of events shows two processes' clocks at least {skew:.3f} s apart "
            f"({pairs} process pair(s) with causal evidence); {tolerance}.")


def _html(analysis: Analysis, plots: Mapping[str, list[str]], rebalances: list[dict[str, Any]],
          election_rows: list[Row], conflict_rows: list[Row]) -> str:
    s = analysis.summary
    found = s["violation_details"][:VIOLATION_ROWS]  # the first ones by time, already collected
    violation_rows = [
        {**row, "evidence": "; ".join(f"{e['file'].rsplit('/', 1)[-1]}:{e['line']} {e['event']}"
                                      for e in row["evidence"] if e is not None)}
        for row in found
    ]
    elections = [r.asDict() for r in election_rows]
    top_conflicts = [r.asDict() for r in conflict_rows]
    total = analysis.violation_count
    inputs, clocks, coverage, lead = s["inputs"], s["clocks"], s["coverage"], s["leadership"]
    verdict = "no safety violations" if total == 0 else f"{total} SAFETY VIOLATION(S)"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>kubecoord coordination report</title>",
        f"<style>{STYLE}</style>",
        "</head><body><h1>kubecoord coordination report</h1><p class='note'>All times are UTC.</p>",
        f"<p class='verdict {'ok' if total == 0 else 'bad'}'><b>{html.escape(verdict)}</b> — {inputs['events']} events "
        f"from {inputs['processes']} process(es) in {inputs['files']} file(s), "
        f"{inputs['first_event']} to {inputs['last_event']}; {inputs['malformed_lines']} malformed "
        f"line(s), {inputs['duplicates_dropped']} duplicate(s) dropped, {len(inputs['unreadable_files'])} "
        f"unreadable file(s).</p>",
        f"<p>{html.escape(clock_sentence(clocks))}</p>",
        f"<p>Lost coverage: {coverage['missing_events']} event(s) missing in {coverage['seq_gaps']} seq gap(s) "
        f"of {coverage['processes_with_gaps']} process(es) — the checks cannot see what happened then.</p>",
        "<h2>Safety violations</h2>",
        _table([{"type": k, "count": v} for k, v in s["violations"].items()], ["type", "count"]),
        _table(violation_rows, ["type", "namespace", "name", "subject", "ts", "detail", "evidence"]) if found else "",
        _figures(plots.get("violations", [])),
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
        _figures(plots.get("leadership", [])),
        "<h2>Group membership</h2>",
        _table([s["membership"]], ["groups", "joins", "leaves", "expiries", "max_churn_per_hour"]),
        "<p>Heartbeat to expiry (seconds):</p>",
        _table(s["membership"]["heartbeat_to_expiry_seconds"], ["group", "count", "p50", "p95", "p99", "max"]),
        _figures(plots.get("membership", [])),
        "<h2>KV stores</h2>",
        _table([s["kv"]], ["stores", "keys", "operations", "conflicts", "conflict_rate"]),
        _table(top_conflicts, ["namespace", "name", "key", "operations", "conflicts", "conflict_rate"]),
        "<h2>Rebalances</h2>",
        f"<p>{s['rebalance']['rebalances']} rebalance(s) in {s['rebalance']['groups']} coordinated group(s); "
        "units moved: units whose holder changed in that generation.</p>",
        _table(_rebalance_groups(rebalances), ["namespace", "name", "rebalances", "generations", "duration_p50",
                                              "duration_max", "units_moved"]),
        _table(s["rebalance"]["duration_seconds"], ["group", "count", "p50", "p95", "p99", "max", "mean"]),
        _figures(plots.get("rebalances", [])),
        "<h2>Faults</h2>" if analysis.faults else "",
        _table([{**f, "ts": _utc(f["ts"]).isoformat()} for f in analysis.faults[:200]],
               ["ts", "kind", "category", "duration", "what"]) if analysis.faults else "",
        "<h2>Input problems</h2>",
        _table(inputs["unreadable_files"], ["file", "reason"]),
        _table(coverage["largest_gaps"], ["process", "after_seq", "before_seq", "missing", "from", "to"]),
        _table(inputs["malformed_examples"], ["file", "line", "reason", "text"]),
        "</body></html>",
    ]
    return "\n".join(parts)
