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
All of it comes from one pass over each process's events in seq order.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

GAP, LATE, COPY = "gap", "late_start", "copy"


@dataclass(frozen=True)
class Coverage:
    events: DataFrame
    """The events without copies."""
    findings: DataFrame
    """kind (gap, late_start, copy), process, after_seq, before_seq, missing, from_ts, to_ts, file."""

    @property
    def gaps(self) -> DataFrame:
        """process, after_seq, before_seq, missing, from_ts, to_ts, file: one row per seq gap."""
        return self.findings.filter(F.col("kind") == GAP).drop("kind")


def deduplicate(events: DataFrame) -> Coverage:
    in_order = Window.partitionBy("process").orderBy("seq", "tu", "file", "line")
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
