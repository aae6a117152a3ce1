"""``kubecoord analyze`` against Spark's own scan-and-parse of the same files, as whole processes.

Usage: .venv/bin/python bench/bench_pipeline.py [--events N ...] [--logs DIR] [--keep DIR]
       [--standalone] [--conf KEY=VALUE ...] [--golden DIR]

For each target size (default 1M and 10M events) it generates a 24-hour history (one file
per process; the 1M one is ``--elections 17 --groups 3 --stores 3 --processes 8
--seed 7``) and runs, back to back, each as a process of its own with the command's
settings (``--master local[2]``, default 1 GiB driver, Spark start-up included):
1. the two reference scans, each a process that starts Spark as the command does and reads
   the files: the *4-field scan* (``spark.read.schema(...).json`` of ts, process, primitive
   and event, counted) and the *full-field scan* (the lines as text, one ``from_json`` of
   the whole event schema, one aggregate counting every field: every line read and fully
   parsed, what Spark itself needs to look at all the data the checks read);
2. ``kubecoord analyze LOGS --out DIR --master local[2]`` (read, check, write the tables,
   summary and report), with Spark's event log on;
3. both scans again, in the reverse order (neither side has a quiet or a loaded machine alone).
It prints the times, the ratio analysis / mean full-field scan (the target is at most 2.5 at
1M events, 3 at 10M) and analysis / mean 4-field scan, the same for CPU seconds (user +
system of every process of each run, from /proc: what load from other work leaves
comparable), and per step of the command (its
progress lines; each step names its Spark jobs) the wall time, jobs, tasks and shuffle bytes
written, from the event log; the load average before and after. With two or more sizes it
ends with the marginal cost per million events of each side (the difference of two sizes'
times over the difference of their events) and their ratio (the target is at most 3).
With ``--standalone`` the analysis runs on a Spark standalone master and two workers
(1 core, 1 GiB each) on 127.0.0.1 as well (the scans are local).
With ``--golden DIR`` the verdicts are compared too (after the timed runs, in a process of
their own): the analysis's summary.json and every table against DIR/golden-N.json, taken by
an earlier run of the pipeline (``tests/analytics/golden.py``; written when missing). That
is the old-versus-new check of a change to the pipeline on histories too large for the
repository.
Wall time on a shared machine is noisy: these are figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HOURS = 24.0
PROCESSES = 8
CLUSTER_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m",
    "spark.cores.max": "2",
}
ERROR_LINE = re.compile(r"(Error|Exception)\b")
FAILURE_LINES = 20
_STEP = re.compile(r"^kubecoord analyze: \[\s*([0-9.]+) s\] (.*)$")


def spec_args(events: int) -> list[str]:
    """generate-history options for about ``events`` events in 24 hours: per election-hour
    1800 renewals (renew every 2 s); one group (4 members) and one store per ~six elections.
    17 elections, 3 groups, 3 stores give 993,057 events with seed 7."""
    elections = max(1, round(17 * events / 1_000_000))
    others = max(1, round(3 * events / 1_000_000))
    return ["--elections", str(elections), "--groups", str(others), "--stores", str(others),
            "--processes", str(PROCESSES), "--hours", str(HOURS), "--seed", "7"]


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


SCAN_FIELDS = ("ts", "process", "primitive", "event")
"""The 4-field scan's fields."""


def scan(logs: str, kind: str) -> int:
    """A reference scan process's body (``bench_pipeline.py --scan LOGS --kind KIND``)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from kubecoord.analytics.session import build_session
    from kubecoord.wire.events import FIELDS

    spark = build_session(master="local[2]", app_name=f"kubecoord-scan-{kind}")
    try:
        names = SCAN_FIELDS if kind == "4-field" else FIELDS
        fields = T.StructType([T.StructField(name, T.StringType()) for name in names])
        if kind == "4-field":
            frame = spark.read.schema(fields).json(logs)
        else:
            # One parse per line (Spark would otherwise split the from_json into one per field).
            spark.conf.set("spark.sql.optimizer.enableJsonExpressionOptimization", "false")
            frame = spark.read.text(logs).select(F.from_json("value", fields).alias("j")).select("j.*")
        frame.select(*(F.count(name).alias(name) for name in names)).collect()
    finally:
        spark.stop()
    return 0


CPU_SAMPLE_SECONDS = 0.1


def timed(command: list[str], log: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and exit status of ``command``. CPU: user + system seconds of
    every process of its session (the Python driver, the JVM it starts), sampled from /proc
    every CPU_SAMPLE_SECONDS (a process's last tenth of a second may be missed): unlike wall
    time, what other work on the machine leaves comparable (0.0 where /proc is missing)."""
    started = time.monotonic()
    seen: dict[str, float] = {}
    with log.open("w") as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        while process.poll() is None:
            seen.update(_session_cpu(process.pid))
            time.sleep(CPU_SAMPLE_SECONDS)
    return time.monotonic() - started, sum(seen.values()), process.returncode


def _session_cpu(session: int) -> dict[str, float]:
    """Per process of ``session`` (its leader's pid): user + system CPU seconds so far."""
    if not hasattr(os, "sysconf") or not Path("/proc").is_dir():
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session:  # stat's 6th field, the session id
            found[entry.name] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return found


def phase(description: str) -> str:
    """A progress step -> the phase it belongs to (the tables' writes are one phase)."""
    if description.startswith("writing table"):
        return "table writes"
    if description.startswith("reading"):
        return "reading"
    return description.split(":")[0]


def event_log_phases(directory: Path) -> dict[str, dict[str, int]]:
    """Jobs, tasks and shuffle bytes written per phase, from the one event log in ``directory``."""
    (path,) = [p for p in directory.iterdir() if not p.name.startswith(".")]
    stage_phase: dict[int, str] = {}
    found: dict[str, dict[str, int]] = defaultdict(lambda: {"jobs": 0, "tasks": 0, "shuffle_bytes": 0})
    with path.open() as events:
        for line in events:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                name = phase((event.get("Properties") or {}).get("spark.job.description") or "other")
                found[name]["jobs"] += 1
                for stage in event["Stage IDs"]:
                    stage_phase[stage] = name
            elif kind == "SparkListenerTaskEnd":
                name = stage_phase.get(event["Stage ID"], "other")
                found[name]["tasks"] += 1
                metrics = event.get("Task Metrics") or {}
                found[name]["shuffle_bytes"] += (metrics.get("Shuffle Write Metrics") or {}).get(
                    "Shuffle Bytes Written", 0)
    return dict(found)


def step_times(stderr: Path, total: float) -> dict[str, float]:
    """Wall seconds per phase from the command's progress lines (to the end of the process)."""
    steps = [(float(m.group(1)), phase(m.group(2))) for line in stderr.read_text().splitlines()
             if (m := _STEP.match(line))]
    times: dict[str, float] = defaultdict(float)
    for (at, name), (until, _) in zip(steps, [*steps[1:], (total, "")], strict=True):
        times[name] += until - at
    return dict(times)


SCANS = ("full-field", "4-field")


def compare(logs: Path, work: Path, label: str, master: str, conf: dict[str, str]) -> dict[str, float]:
    me = [sys.executable, str(Path(__file__).resolve())]
    events_dir = work / f"events-{label}"
    shutil.rmtree(events_dir, ignore_errors=True)
    events_dir.mkdir(parents=True)
    out = work / f"out-{label}"
    # One plain file: Spark 4 rolls event logs into a directory of zstd files by default.
    settings = {**conf, "spark.eventLog.enabled": "true", "spark.eventLog.dir": events_dir.as_uri(),
                "spark.eventLog.rolling.enabled": "false", "spark.eventLog.compress": "false"}
    analyze = [sys.executable, "-m", "kubecoord.analytics", str(logs), "--out", str(out), "--master", master,
               *(x for key, value in settings.items() for x in ("--conf", f"{key}={value}"))]
    before = load()
    scans: dict[str, list[float]] = {kind: [] for kind in SCANS}
    scan_cpu: dict[str, list[float]] = {kind: [] for kind in SCANS}

    def run_scan(kind: str, run: int) -> None:
        wall, cpu, _ = timed([*me, "--scan", str(logs), "--kind", kind], work / f"scan-{kind}-{run}.err")
        scans[kind].append(wall)
        scan_cpu[kind].append(cpu)

    for kind in SCANS:
        run_scan(kind, 1)
    elapsed, cpu, status = timed(analyze, work / f"analyze-{label}.err")
    for kind in reversed(SCANS):
        run_scan(kind, 2)
    after = load()
    if status not in (0, 3):
        raise SystemExit(failure(work / f"analyze-{label}.err", status))
    summary = json.loads((out / "summary.json").read_text())
    baseline = {kind: sum(times) / len(times) for kind, times in scans.items()}
    baseline_cpu = {kind: sum(times) / len(times) for kind, times in scan_cpu.items()}
    phases = event_log_phases(events_dir)
    times = step_times(work / f"analyze-{label}.err", elapsed)
    total = {key: sum(p[key] for p in phases.values()) for key in ("jobs", "tasks", "shuffle_bytes")}
    events = int(summary["inputs"]["events_read"])
    print(f"[{label}] {summary['inputs']['events']:,} events: analyze {elapsed:.1f} s; "
          + "; ".join(f"{kind} scan {t[0]:.1f} / {t[1]:.1f} s, ratio {elapsed / baseline[kind]:.2f}x"
                      for kind, t in scans.items())
          + f" (target <= 2.5 at 1M, 3 at 10M against the full-field scan); {total['jobs']} jobs, "
          f"{total['tasks']:,} tasks, {total['shuffle_bytes'] / 2**20:,.1f} MiB shuffled; "
          f"violations {sum(summary['violations'].values())}; load before {before}, after {after} "
          f"({os.cpu_count()} cores)", flush=True)
    if cpu:
        print(f"  CPU (user + system, every process of the run): analyze {cpu:.1f} s; " + "; ".join(
            f"{kind} scan {t[0]:.1f} / {t[1]:.1f} s, ratio {cpu / baseline_cpu[kind]:.2f}x"
            for kind, t in scan_cpu.items()), flush=True)
    print(f"  {'phase':<40} {'wall s':>7} {'jobs':>5} {'tasks':>6} {'shuffle MiB':>11}")
    for name in dict.fromkeys([*times, *phases]):
        counts = phases.get(name, {"jobs": 0, "tasks": 0, "shuffle_bytes": 0})
        print(f"  {name[:40]:<40} {times.get(name, 0.0):7.1f} {counts['jobs']:5d} {counts['tasks']:6d} "
              f"{counts['shuffle_bytes'] / 2**20:11.1f}", flush=True)
    return {"events": events, "analyze": elapsed, **baseline, "analyze_cpu": cpu,
            **{f"{kind}_cpu": value for kind, value in baseline_cpu.items()}}


def marginal(runs: list[dict[str, float]]) -> None:
    """Seconds per million events of each side between the smallest and the largest run."""
    small, large = min(runs, key=lambda r: r["events"]), max(runs, key=lambda r: r["events"])
    millions = (large["events"] - small["events"]) / 1e6
    if millions <= 0:
        return
    for suffix, what in (("", "wall"), ("_cpu", "CPU")):
        cost = {side: (large[side + suffix] - small[side + suffix]) / millions for side in ("analyze", *SCANS)}
        if not all(cost.values()):
            continue
        print(f"marginal {what} cost per million events ({small['events']:,} -> {large['events']:,}): analyze "
              f"{cost['analyze']:.2f} s; " + "; ".join(
                  f"{kind} scan {cost[kind]:.2f} s, ratio {cost['analyze'] / cost[kind]:.2f}x" for kind in SCANS)
              + " (target <= 3 against the full-field scan)", flush=True)


def failure(stderr: Path, status: int) -> str:
    """Why the analysis failed: its first error lines (a Java stack's tail hides the
    exception), with its whole stderr kept outside the work directory, which is deleted."""
    kept = Path(tempfile.gettempdir()) / f"kubecoord-bench-{stderr.name}"
    shutil.copyfile(stderr, kept)
    errors = [line for line in stderr.read_text().splitlines() if ERROR_LINE.search(line)]
    return "\n".join([f"analyze exited {status}; its stderr: {kept}", *errors[:FAILURE_LINES]])


def golden(out: Path, logs: Path, path: Path) -> None:
    """The analysis in ``out`` against the golden copy at ``path`` (captured when missing)."""
    command = "compare" if path.exists() else "capture"
    path.parent.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parent.parent
    finished = subprocess.run([sys.executable, "-m", "tests.analytics.golden", command, str(out), str(logs), str(path)],
                              cwd=root, capture_output=True, text=True, check=False)
    print(f"  verdicts against {path}: {finished.stdout.strip() or finished.stderr.strip()[-2000:]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scan", metavar="LOGS", help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=SCANS, default=SCANS[0], help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--logs", type=Path, help="generate histories here and reuse them on later runs")
    parser.add_argument("--keep", type=Path, help="keep the last analysis output (report, plots) here")
    parser.add_argument("--standalone", action="store_true", help="also on a 2-worker standalone cluster")
    parser.add_argument("--golden", type=Path, metavar="DIR",
                        help="compare the verdicts with DIR/golden-N.json (captured there when missing)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting for the analysis (e.g. spark.driver.memory=2g)")
    args = parser.parse_args()
    if args.scan:
        return scan(args.scan, args.kind)
    conf = dict(item.split("=", 1) for item in args.conf)
    work = Path(tempfile.mkdtemp(prefix="kubecoord-bench-"))
    logs_root = args.logs or work
    runs: list[dict[str, float]] = []
    try:
        for target in args.events:
            logs = logs_root / f"logs-{target}"
            if not (logs / "_manifest.json").exists():
                subprocess.run([sys.executable, "-m", "kubecoord_testkit", "generate-history", "--out", str(logs),
                                *spec_args(target)], check=True, stdout=subprocess.DEVNULL)
            size = sum(p.stat().st_size for p in logs.iterdir())
            print(f"history of ~{target:,} events: {size / 2**20:,.0f} MiB in {logs}", flush=True)
            runs.append(compare(logs, work, f"local2-{target}", "local[2]", conf))
            if args.standalone:
                from kubecoord_testkit.servers.spark import StandaloneCluster

                with StandaloneCluster(workers=2, cores=1, memory="1g", log_dir=work / "standalone") as cluster:
                    compare(logs, work, f"standalone-{target}", cluster.url, {**CLUSTER_CONF, **conf})
            if args.golden:
                golden(work / f"out-local2-{target}", logs, args.golden / f"golden-{target}.json")
            if args.keep:
                shutil.rmtree(args.keep, ignore_errors=True)
                shutil.copytree(work / f"out-local2-{target}", args.keep)
        if len(runs) > 1:
            marginal(runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
