"""Throughput of the analysis pipeline on generated histories, on local[2].

Usage: .venv/bin/python bench/bench_pipeline.py [--events N ...] [--keep DIR]

For each target size (default 1M and 10M events) it generates a 24-hour history (one
file per process), runs what ``kubecoord analyze`` runs (read, check, compute, write
the Parquet tables, summary and report) and prints events per second, the Spark
version and settings, and the peak memory of the driver: the JVM's heap high-water
mark, the JVM process's peak resident set (VmHWM) and the Python driver's peak RSS.
Progress goes to stderr. Wall time on this shared 2-core machine is noisy: the
figures are for orders of magnitude, not for asserting.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubecoord.analytics import output
from kubecoord.analytics.generate import Spec, generate
from kubecoord.analytics.pipeline import analyze
from kubecoord.analytics.progress import Progress
from kubecoord.analytics.session import BASE_CONF, build_session

HOURS = 24.0
PROCESSES = 8
BENCH_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
}


def spec_for(events: int) -> Spec:
    """Entities whose 24 hours add up to about ``events``: per election-hour 1800 renewals
    (renew every 2 s); one group (4 members, 720 heartbeats/hour each) and one store
    (720 operations/hour) per five elections."""
    per_election = HOURS * (1800 + 4 * 720 / 5 + 720 / 5)
    elections = max(1, round(events / per_election))
    return Spec(elections=elections, groups=max(1, elections // 5), stores=max(1, elections // 5),
                hours=HOURS, processes=PROCESSES, seed=42)


def jvm_memory(spark: Any) -> tuple[float, float]:
    """(peak heap used MiB summed over heap pools, peak JVM RSS MiB)."""
    jvm = spark.sparkContext._jvm
    peak_heap = 0
    for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        if pool.getType().toString() == "Heap memory":
            peak_heap += pool.getPeakUsage().getUsed()
    pid = jvm.java.lang.ProcessHandle.current().pid()
    hwm_kib = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm_kib = int(line.split()[1])
    return peak_heap / 2**20, hwm_kib / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--keep", type=Path, help="keep the last run's output (report, plots) here")
    parser.add_argument("--driver-memory", default=BENCH_CONF["spark.driver.memory"], help="spark.driver.memory")
    args = parser.parse_args()
    progress = Progress("bench_pipeline")
    work = Path(tempfile.mkdtemp(prefix="kubecoord-bench-"))
    spark = None
    try:
        for target in args.events:
            logs, out = work / f"logs-{target}", work / f"out-{target}"
            spec = spec_for(target)
            progress.step(f"generating ~{target:,} events ({spec.elections} elections, {spec.groups} groups, "
                          f"{spec.stores} stores, {spec.processes} processes, {spec.hours:g} h)")
            started = time.monotonic()
            manifest = generate(logs, spec)
            generated = time.monotonic() - started
            size = sum(p.stat().st_size for p in logs.iterdir())
            progress.step(f"generated {manifest.events:,} events, {size / 2**20:.0f} MiB, in {generated:.0f} s")
            if spark is None:
                progress.step("starting Spark")
                BENCH_CONF["spark.driver.memory"] = args.driver_memory
                spark = build_session(master="local[2]", conf=BENCH_CONF, app_name="kubecoord-bench")
                settings = {**BASE_CONF, **BENCH_CONF}
                print(f"Spark {spark.version} on local[2], default JVM options; settings {settings}")
            started = time.monotonic()
            analysis = analyze(spark, [str(logs)], progress=progress)
            output.write(analysis, out, progress=progress)
            elapsed = time.monotonic() - started
            analysis.close()
            heap, rss = jvm_memory(spark)
            python_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"{manifest.events:>11,} events  {elapsed:7.1f} s  {manifest.events / elapsed:>9,.0f} events/s  "
                  f"violations {analysis.violation_count}  peak JVM heap (sum of pool peaks) {heap:,.0f} MiB  "
                  f"peak JVM RSS {rss:,.0f} MiB  peak Python RSS {python_rss:,.0f} MiB  (generation {generated:.0f} s; "
                  f"load average {load} on {os.cpu_count()} cores)",
                  flush=True)
            if analysis.violation_count:
                print(f"violations by type: {analysis.summary['violations']}", flush=True)
            if args.keep:
                shutil.rmtree(args.keep, ignore_errors=True)
                shutil.copytree(out, args.keep)
            shutil.rmtree(logs)
            shutil.rmtree(out)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
