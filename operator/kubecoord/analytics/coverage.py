"""Deduplication on (process, seq) and lost coverage: the gaps in each process's seq.

Every emitter numbers its events 1, 2, 3... (``seq``, per process). So:
- the same (process, seq) twice — the same log ingested twice, an archive copy beside
  the live file — is one event: later copies are dropped (counted in the summary). The
  timestamp is part of the key: a process restarted under the same name (a pod's
  container restarting) numbers from 1 again, and those events are not copies;
- a jump in seq (3 then 7) means events were dropped before reaching the log (a full
  queue or disk in kubecoord.history, a lost file): the checks cannot see what happened
  then, so each gap is reported as lost coverage with the times around it.
Events without ``seq`` are kept as they are. A log whose first seq is above 1 (rotated
away, or the process started logging earlier) is reported as starting late, not as a gap.
All of it comes from one pass over each process's events in seq order — unless the
read's per-split statistics prove that no copy can be present (from_ranges): when every
split holds each process's events as consecutive lines with consecutive seqs, and no two
splits' seq ranges of one process overlap, every (process, seq) is unique and the gaps
and late starts are where one range ends and the next begins. Then that process's events
are not sorted: its findings come from the ranges on the driver (the usual case: one
file per process, written in order). The other processes (copies, restarts, lines of
several processes interleaved, a gap inside a split, events without seq) take the pass.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kubecoord.analytics.frames import local_rows

GAP, LATE, COPY = "gap", "late_start", "copy"


@dataclass(frozen=True)
class Coverage:
    events: DataFrame
    """The events without copies."""
    findings: DataFrame
    """kind (gap, late_start, copy), process, after_seq, before_seq, missing, from_ts, to_ts, file."""
    sorted_processes: list[str] = field(default_factory=list)
    """The processes whose events took the sorted pass (resolve(): the others' ranges sufficed)."""
    persisted: list[DataFrame] = field(default_factory=list)

    @property
    def gaps(self) -> DataFrame:
        """process, after_seq, before_seq, missing, from_ts, to_ts, file: one row per seq gap."""
        return self.findings.filter(F.col("kind") == GAP).drop("kind")


def deduplicate(events: DataFrame) -> Coverage:
    in_order = Window.partitionBy("process").orderBy("seq", "tu", "file", "block", "rid")  # (file, line): reading.ORDER
    marked = events.select("*", F.lag(F.struct("seq", "tu", "ts")).over(in_order).alias("_prev"))
    has_seq = F.col("seq").isNotNull()
    copy = has_seq & (F.col("_prev.seq") == F.col("seq")) & (F.col("_prev.tu") == F.col("tu"))
    marked = marked.withColumn("_copy", F.coalesce(copy, F.lit(False)))
    kind = (
        F.when(F.col("_copy"), F.lit(COPY))
        .when(has_seq & F.col("_prev").isNull() & (F.col("seq") > 1), F.lit(LATE))
        .when(has_seq & (F.col("seq") - F.col("_prev.seq") > 1), F.lit(GAP))
    )
    findings = marked.select(kind.alias("kind"), "*").filter(F.col("kind").isNotNull()).select(
        "kind",
        "process",
        F.coalesce(F.col("_prev.seq"), F.lit(0)).alias("after_seq"),
        F.col("seq").alias("before_seq"),
        F.when(F.col("kind") == COPY, 0).otherwise(
            F.col("seq") - F.coalesce(F.col("_prev.seq"), F.lit(0)) - 1).alias("missing"),
        F.col("_prev.ts").alias("from_ts"),
        F.col("ts").alias("to_ts"),
        "file",
    )
    kept = marked.filter(~F.col("_copy")).drop("_prev", "_copy")
    return Coverage(events=kept, findings=findings)


_RANGE_FINDINGS = T.StructType([
    T.StructField("kind", T.StringType()),
    T.StructField("process", T.StringType()),
    T.StructField("after_seq", T.LongType()),
    T.StructField("before_seq", T.LongType()),
    T.StructField("missing", T.LongType()),
    T.StructField("from_tu", T.LongType()),
    T.StructField("to_tu", T.LongType()),
    T.StructField("file", T.StringType()),
])


def resolve(spark: SparkSession, events: DataFrame, ranges: Sequence[dict[str, Any]]) -> Coverage:
    """deduplicate()'s events and findings, from the read's seq ranges (reading.Inputs.ranges)
    for every process whose ranges prove it has no copy, from the sorted pass for the others.
    The pass's events are persisted on disk (``persisted``; release them when done)."""
    per_process: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for split in ranges:
        per_process[split["process"]].append(split)
    rows: list[tuple[Any, ...]] = []
    doubtful: list[str] = []
    for process, splits in sorted(per_process.items()):
        found = _range_findings(process, splits)
        if found is None:
            doubtful.append(process)
        else:
            rows += found
    findings = local_rows(spark, rows, _RANGE_FINDINGS).select(
        "kind", "process", "after_seq", "before_seq", "missing",
        F.timestamp_micros("from_tu").alias("from_ts"), F.timestamp_micros("to_tu").alias("to_ts"), "file",
    )
    if not doubtful:
        return Coverage(events=events, findings=findings, sorted_processes=[])
    in_doubt = F.col("process").isin(*doubtful)
    sorted_pass = deduplicate(events.filter(in_doubt) if len(doubtful) < len(per_process) else events)
    # On disk, streamed: the pass is partitioned by process, so one cached block holds a
    # whole process's events (1.25M at 10M events), which a 1 GiB driver cannot build in memory.
    passed = sorted_pass.events.persist(StorageLevel.DISK_ONLY)
    kept = passed if len(doubtful) == len(per_process) else events.filter(~in_doubt).unionByName(passed)
    return Coverage(events=kept, findings=findings.unionByName(sorted_pass.findings), sorted_processes=doubtful,
                    persisted=[passed])


def _range_findings(process: str, splits: list[dict[str, Any]]) -> list[tuple[Any, ...]] | None:
    """One process's gaps and late start from its splits' seq ranges, or None when they
    cannot rule out a copy (or a gap inside a split)."""
    if any(split["with_seq"] != split["events"] or not split["consecutive"] for split in splits):
        return None
    rows: list[tuple[Any, ...]] = []
    previous: dict[str, Any] | None = None
    for split in sorted(splits, key=lambda r: r["seq_min"]):
        if previous is not None and split["seq_min"] <= previous["seq_max"]:
            return None  # two ranges overlap: a copy (or a restart) needs the pass
        after = previous["seq_max"] if previous is not None else 0
        if split["seq_min"] - after > 1:
            rows.append((LATE if previous is None else GAP, process, after, split["seq_min"],
                         split["seq_min"] - after - 1, previous["last_tu"] if previous is not None else None,
                         split["first_tu"], split["file"]))
        previous = split
    return rows
