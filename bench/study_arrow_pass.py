"""What one pass per primitive in Python would cost a cold analysis, against the
checks' Spark queries: each side a whole process of its own, as the command runs.

Usage: .venv/bin/python bench/study_arrow_pass.py LOGS [--runs N]

Needs pandas and pyarrow, which kubecoord does not depend on (PySpark's grouped Arrow
functions go through pandas): ``.venv/bin/pip install pandas==2.2.3 pyarrow==18.1.0``
(or a directory on PYTHONPATH: Spark's Python workers inherit it).

Each process runs ``kubecoord.analytics.pipeline.analyze`` on LOGS up to the checks (read,
dedup, clocks, the events' one shuffle), builds the cached events, then:
- ``spark``: the leadership check as the command runs it — its terms, failover gaps and
  overlap windows, and its overlaps — each counted;
- ``arrow``: the Python workers' start (a 4-row grouped Arrow function); every event of
  every primitive (all columns) to Python grouped by (primitive, namespace, name) with
  nothing computed, cold then warm (what a pass over every primitive pays first); the
  leader holder events to Python grouped by election; the terms by a NumPy pass per
  election (the holder's acquisitions numbered, each term's first and last time and
  event count; its term keys and event counts are compared with the check's terms, so
  the pass computes what the check does), then again warm.
Not a ``bench_*`` script, so ``make bench`` does not run it: a study of a design not built,
with dependencies the project does not install.
It prints the seconds of each step and what the Python path pays before computing
anything, and the load after each side. Wall time on a shared machine is noisy: these are figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from measure import load

HOLDER = ["process", "member", "epoch"]
TERM_SCHEMA = ("namespace string, name string, process string, member string, epoch long, acquisition long, "
               "first_t double, last_t double, events long")


class _Stop(Exception):
    """Raised by the probe check: the analysis goes no further than the cached events."""


def _terms(table: Any) -> Any:
    """The terms of one election's holder events: a holder's acquisition is the number of
    ``acquired`` events of it so far in the process's order (0 before the first)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def column(name: str) -> Any:
        return table.column(name).to_numpy(zero_copy_only=False)

    pos = np.where(pc.is_null(table.column("seq")).to_numpy(zero_copy_only=False), column("tu"), column("seq"))
    process, member, epoch = column("process"), column("member"), column("epoch")
    order = np.lexsort((pos, epoch, member, process))
    process, member, epoch, t = process[order], member[order], epoch[order], column("t")[order]
    acquired = (column("event")[order] == "acquired").astype(np.int64)
    new_holder = np.ones(len(order), bool)
    new_holder[1:] = (process[1:] != process[:-1]) | (member[1:] != member[:-1]) | (epoch[1:] != epoch[:-1])
    so_far = np.cumsum(acquired)
    holder = np.cumsum(new_holder) - 1
    acquisition = so_far - (so_far - acquired)[np.flatnonzero(new_holder)][holder]
    new_term = new_holder.copy()
    new_term[1:] |= acquisition[1:] != acquisition[:-1]
    starts = np.flatnonzero(new_term)
    count = len(starts)
    return pa.table({
        "namespace": [table.column("namespace")[0].as_py()] * count, "name": [table.column("name")[0].as_py()] * count,
        "process": process[starts], "member": member[starts], "epoch": epoch[starts],
        "acquisition": acquisition[starts], "first_t": np.minimum.reduceat(t, starts),
        "last_t": np.maximum.reduceat(t, starts), "events": np.diff(np.append(starts, len(order))),
    })


def _timed(figures: dict[str, Any], name: str, action: Any) -> Any:
    started = time.monotonic()
    result = action()
    figures[name] = round(time.monotonic() - started, 1)
    return result


def probe(side: str, logs: str) -> int:
    """One side's process: its figures as one JSON line on stdout."""
    from pyspark.sql import functions as F

    from kubecoord.analytics import pipeline
    from kubecoord.analytics.session import build_session
    from kubecoord.wire.events import HOLDER_EVENTS, Primitive

    figures: dict[str, Any] = {}
    leadership = pipeline.CHECKS[0]  # the checks in report order: leadership first

    def check(ctx: Any) -> Any:
        _timed(figures, "events cached", ctx.events.count)
        if side == "spark":
            found = leadership(ctx)
            for name in ("leadership_intervals", "failover_gaps", "leadership_windows"):
                _timed(figures, name, found.tables[name].count)
            _timed(figures, "overlaps", found.violations[0].count)
            raise _Stop
        spark = ctx.events.sparkSession
        _timed(figures, "python workers", spark.range(4).repartition(2).groupBy("id").applyInArrow(
            lambda t: t, "id long").count)
        everything = ctx.events.groupBy("primitive", "namespace", "name").applyInArrow(
            lambda t: t.slice(0, 1).select(["name"]), "name string")
        _timed(figures, "every event to python", everything.count)
        _timed(figures, "every event again", everything.count)
        held = ctx.events.filter((F.col("primitive") == Primitive.LEADER_ELECTION)
                                 & F.col("event").isin(*HOLDER_EVENTS))
        by_election = held.select("namespace", "name", *HOLDER, "seq", "tu", "t", "event").groupBy("namespace", "name")
        _timed(figures, "holder events to python", by_election.applyInArrow(
            lambda t: t.slice(0, 1).select(["name"]), "name string").count)
        terms = by_election.applyInArrow(_terms, TERM_SCHEMA)
        found = _timed(figures, "terms", terms.collect)
        _timed(figures, "terms again", terms.count)
        expected = leadership(ctx).tables["leadership_intervals"].select(
            "namespace", "name", *HOLDER, "acquisition", "events").collect()
        key = ("namespace", "name", *HOLDER, "acquisition", "events")
        same = sorted(tuple(r[k] for k in key) for r in found) == sorted(tuple(r[k] for k in key) for r in expected)
        figures["terms equal the check's"] = "yes" if same else "NO"
        raise _Stop

    pipeline.CHECKS = [check, *pipeline.CHECKS]
    spark = build_session(master="local[2]", app_name=f"kubecoord-bench-{side}")
    try:
        _timed(figures, "process until the checks", lambda: _analyze_until_stopped(pipeline, spark, logs))
    finally:
        spark.stop()
    print(json.dumps(figures))
    return 0


def _analyze_until_stopped(pipeline: Any, spark: Any, logs: str) -> None:
    try:
        pipeline.analyze(spark, [logs])
    except _Stop:
        return
    raise SystemExit("the probe check never ran")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs")
    parser.add_argument("--side", choices=("spark", "arrow"), help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    if args.side:
        return probe(args.side, args.logs)
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as missing:
        raise SystemExit(f"{missing.name} is missing: pip install pandas==2.2.3 pyarrow==18.1.0") from None
    for run in range(args.runs):
        for side in ("spark", "arrow"):
            done = subprocess.run([sys.executable, __file__, args.logs, "--side", side], capture_output=True,
                                  text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{side} exited {done.returncode}: {done.stderr[-3000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"run {run + 1}, {side} ({load()}): " + ", ".join(f"{k} {v}" for k, v in figures.items()), flush=True)
            if side == "spark":
                check = sum(v for k, v in figures.items() if k not in ("events cached", "process until the checks"))
                print(f"  the leadership check, cold: {check:.1f} s", flush=True)
            else:
                fixed = figures["python workers"] + figures["every event to python"]
                print(f"  a pass over every primitive pays {fixed:.1f} s cold before computing anything "
                      f"(workers {figures['python workers']:g} s, every event to Python "
                      f"{figures['every event to python']:g} s; warm {figures['every event again']:g} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
