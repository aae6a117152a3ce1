"""The analysis against Spark's own scan-and-parse of the same files, side by side.

Usage: .venv/bin/python bench/bench_pipeline.py [--events N ...] [--standalone-events N ...] [--keep DIR]

For each target size (default 1M and 10M events) it generates a 24-hour history (one
file per process) and, in one Spark session with exactly the settings ``kubecoord
analyze --master local[2]`` uses (build_session with no extra conf: default 1 GiB
driver, shuffle partitions sized by the pipeline itself):
1. scan: ``spark.read.schema(...).json(files)`` and one aggregate over every field (so
   every line is read and fully parsed) — what Spark itself needs to look at the data;
2. the whole analysis: what the command runs (read, check, compute, write the Parquet
   tables, summary and report);
3. the scan again (so neither side has the JIT's warm-up alone),
and prints both times, the ratio analysis / mean scan (the target is at most 3), events
per second, the Spark jobs and tasks the analysis ran, the driver's peak memory (JVM heap
pools' peaks, JVM peak RSS, Python peak RSS) and the load average (the machine is shared).
With ``--standalone-events`` the same comparison runs on a Spark standalone master and
two workers (1 core, 1 GiB each) on 127.0.0.1, started from the pyspark installation.
Wall time on a shared machine is noisy: these are figures, not assertions.
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

from pyspark.sql import functions as F
from pyspark.sql import types as T

from kubecoord.analytics import output
from kubecoord.analytics.pipeline import analyze
from kubecoord.analytics.progress import Progress
from kubecoord.analytics.session import build_session
from kubecoord.wire.events import FIELDS
from kubecoord_testkit.history_generator import Spec, generate
from kubecoord_testkit.servers.spark import StandaloneCluster

HOURS = 24.0
PROCESSES = 8
CLUSTER_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m",
    "spark.cores.max": "2",
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


def scan(spark: Any, logs: Path) -> float:
    """Spark's own read and full parse of every line: the floor for any analysis."""
    fields = T.StructType([T.StructField(name, T.StringType()) for name in FIELDS])
    started = time.monotonic()
    frame = spark.read.schema(fields).json(str(logs))
    frame.select(*(F.count(name).alias(name) for name in FIELDS)).collect()
    return time.monotonic() - started


def jobs_and_tasks(spark: Any, group: str) -> tuple[int, int]:
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    tasks = 0
    for job in jobs:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            stage_info = tracker.getStageInfo(stage)
            tasks += stage_info.numTasks if stage_info else 0
    return len(jobs), tasks


def compare(spark: Any, label: str, logs: Path, out: Path, events: int, progress: Progress) -> None:
    progress.step(f"{label}: scan")
    first = scan(spark, logs)
    progress.step(f"{label}: analysis")
    group = f"analysis-{label}-{events}"
    spark.sparkContext.setJobGroup(group, "kubecoord analyze")
    started = time.monotonic()
    analysis = analyze(spark, [str(logs)], progress=progress)
    output.write(analysis, out, progress=progress, spark=spark)
    elapsed = time.monotonic() - started
    analysis.close()
    spark.sparkContext.setJobGroup("scan", "scan")
    jobs, tasks = jobs_and_tasks(spark, group)
    progress.step(f"{label}: scan again")
    second = scan(spark, logs)
    baseline = (first + second) / 2
    heap, rss = jvm_memory(spark)
    python_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    print(f"[{label}] {analysis.summary['inputs']['events']:>11,} events  analysis {elapsed:7.1f} s  "
          f"scan {first:5.1f} s / {second:5.1f} s  ratio {elapsed / baseline:4.1f}x (target <= 3)  "
          f"{events / elapsed:>9,.0f} events/s  {jobs} jobs, {tasks:,} tasks, {partitions} shuffle partitions  "
          f"violations {analysis.violation_count}  peak JVM heap {heap:,.0f} MiB  peak JVM RSS {rss:,.0f} MiB  "
          f"peak Python RSS {python_rss:,.0f} MiB  load average {load} on {os.cpu_count()} cores", flush=True)
    if analysis.violation_count:
        print(f"violations by type: {analysis.summary['violations']}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--standalone-events", type=int, nargs="*", default=[1_000_000],
                        help="sizes to run on a standalone master and two workers too")
    parser.add_argument("--keep", type=Path, help="keep the last run's output (report, plots) here")
    parser.add_argument("--logs", type=Path, help="generate histories here and reuse them on later runs")
    args = parser.parse_args()
    progress = Progress("bench_pipeline")
    work = Path(tempfile.mkdtemp(prefix="kubecoord-bench-"))
    logs_root = args.logs or work
    sizes = sorted(set(args.events) | set(args.standalone_events))
    try:
        histories = {}
        for target in sizes:
            logs = logs_root / f"logs-{target}"
            spec = spec_for(target)
            if not (logs / "_manifest.json").exists():
                progress.step(f"generating ~{target:,} events ({spec.elections} elections, {spec.groups} groups, "
                              f"{spec.stores} stores, {spec.processes} processes, {spec.hours:g} h)")
                generate(logs, spec)
            size = sum(p.stat().st_size for p in logs.iterdir())
            progress.step(f"history of ~{target:,} events: {size / 2**20:,.0f} MiB")
            histories[target] = logs
        if args.events:
            spark = build_session(master="local[2]", app_name="kubecoord-bench")
            print(f"Spark {spark.version} on local[2], the command's settings (driver memory "
                  f"{spark.sparkContext.getConf().get('spark.driver.memory', '1g (default)')})", flush=True)
            try:
                for target in args.events:
                    compare(spark, "local[2]", histories[target], work / f"out-{target}", target, progress)
            finally:
                spark.stop()
        if args.standalone_events:
            with StandaloneCluster(workers=2, cores=1, memory="1g", log_dir=work / "standalone") as cluster:
                spark = build_session(master=cluster.url, conf=CLUSTER_CONF, app_name="kubecoord-bench")
                print(f"Spark standalone {cluster.url}: 2 workers x 1 core, executors 512m", flush=True)
                try:
                    for target in args.standalone_events:
                        compare(spark, "standalone", histories[target], work / f"cluster-{target}", target,
                                progress)
                finally:
                    spark.stop()
        if args.keep:
            last = sorted(work.glob("out-*")) or sorted(work.glob("cluster-*"))
            if last:
                shutil.rmtree(args.keep, ignore_errors=True)
                shutil.copytree(last[-1], args.keep)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
