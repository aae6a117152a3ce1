"""Leadership intervals, the two leader safety checks, and failover gaps.

An interval is one holder's term: the holder's own events (acquired, renewed, lost,
resigned) with one (namespace, name, process, member, epoch). It starts at ``acquired``
(or the first event when the log begins mid-term) and ends at ``lost``/``resigned`` —
or, when the process vanished, at its last ``valid_until`` (its own view of until when
it led); a term-end logged after its valid_until ends at the valid_until.

Checks, each tolerant of ``skew`` seconds of clock difference between processes:
- overlapping_leadership: two intervals of one election overlap by more than skew;
- epoch_not_increasing: an acquisition whose epoch is not above every epoch acquired
  more than skew earlier (the same member re-acquiring its own epoch is allowed).
Failover gap: from the end of leadership (the latest end so far) to the start of the
next term; cause "resign" when that term ended by resigning, "expiry" otherwise (lost
or vanished).
Not guaranteed: intervals of a process whose log was lost entirely are invisible.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from kubecoord.analytics import schema, violations
from kubecoord.analytics.reading import evidence

ELECTION = ("namespace", "name")
TERM = ("namespace", "name", "process", "member", "epoch")


def intervals(events: DataFrame) -> DataFrame:
    """One row per term: TERM, start/end (seconds and timestamps), end_reason, evidence."""
    held = events.filter((F.col("primitive") == schema.LEADER) & F.col("event").isin(*schema.HOLDER_EVENTS))
    is_end = F.col("event").isin(*schema.TERM_ENDS)
    row = F.struct("t", evidence().alias("ev"))
    terms = held.groupBy(*TERM).agg(
        F.min(F.when(F.col("event") == "acquired", F.col("t"))).alias("acquired_t"),
        F.min("t").alias("first_t"),
        F.max("t").alias("last_t"),
        F.max("valid_until").alias("max_valid_until"),
        F.min(F.when(is_end, F.struct("t", "event", evidence().alias("ev")))).alias("end_row"),
        F.min(row).alias("first_row"),
        F.max(row).alias("last_row"),
        F.count("*").alias("events"),
    )
    end_t = F.col("end_row.t")
    end = F.when(end_t.isNotNull(), F.least(end_t, F.coalesce("max_valid_until", end_t))).otherwise(
        F.coalesce("max_valid_until", "last_t")
    )
    return terms.select(
        *TERM,
        F.coalesce("acquired_t", "first_t").alias("start"),
        end.alias("end"),
        F.coalesce("end_row.event", F.lit("expired")).alias("end_reason"),
        "events",
        F.col("first_row.ev").alias("start_evidence"),
        F.coalesce("end_row.ev", "last_row.ev").alias("end_evidence"),
    ).select(
        "*",
        F.timestamp_seconds("start").alias("start_ts"),
        F.timestamp_seconds("end").alias("end_ts"),
        (F.col("end") - F.col("start")).alias("duration"),
    )


def _by_start() -> WindowSpec:
    return Window.partitionBy(*ELECTION).orderBy("start", "end", "process", "member", "epoch")


def overlaps(terms: DataFrame, skew: float) -> DataFrame:
    """overlapping_leadership violations: each term against the latest-ending earlier one."""
    earlier = _by_start().rowsBetween(Window.unboundedPreceding, -1)
    summary = F.struct("end", "process", "member", "epoch", "start_evidence", "end_evidence")
    found = terms.withColumn("prev", F.max(summary).over(earlier))
    overlap = F.least(F.col("prev.end"), F.col("end")) - F.col("start")
    found = found.filter(F.col("prev").isNotNull() & (overlap > skew))
    detail = F.format_string(
        "%s (epoch %d) took over while %s (epoch %d) still led: %s s of overlap",
        F.col("member"), F.col("epoch"), F.col("prev.member"), F.col("prev.epoch"), violations.seconds(overlap),
    )
    return violations.shape(
        found,
        kind="overlapping_leadership",
        primitive=schema.LEADER,
        subject=F.col("member"),
        ts=F.col("start_ts"),
        detail=detail,
        evidence=F.array("prev.start_evidence", "prev.end_evidence", "start_evidence", "end_evidence"),
    )


def epoch_regressions(events: DataFrame, skew: float) -> DataFrame:
    """epoch_not_increasing violations among ``acquired`` events."""
    acquired = events.filter((F.col("primitive") == schema.LEADER) & (F.col("event") == "acquired"))
    earlier = violations.earlier_than(skew, *ELECTION)
    best = F.max(F.struct("epoch", "tu", "member", evidence().alias("ev"))).over(earlier)
    found = acquired.withColumn("prev", best).filter(
        (F.col("prev.epoch") > F.col("epoch"))
        | ((F.col("prev.epoch") == F.col("epoch")) & (F.col("prev.member") != F.col("member")))
    )
    detail = F.format_string(
        "%s acquired epoch %d after %s had acquired epoch %d",
        F.col("member"), F.col("epoch"), F.col("prev.member"), F.col("prev.epoch"),
    )
    return violations.shape(
        found,
        kind="epoch_not_increasing",
        primitive=schema.LEADER,
        subject=F.col("member"),
        ts=F.col("ts"),
        detail=detail,
        evidence=F.array("prev.ev", evidence()),
    )


def failover_gaps(terms: DataFrame, skew: float) -> DataFrame:
    """One row per change of leader: the latest end so far to the next term's start.

    The latest end so far (not the previous term's end) so that a term nested inside
    another does not count as a failover; a next term starting more than ``skew``
    before that end is an overlap (a violation), not a failover.
    """
    so_far = _by_start().rowsBetween(Window.unboundedPreceding, 0)
    latest = F.max(F.struct("end", "end_reason", "member", "epoch", "end_ts", "end_evidence")).over(so_far)
    following = F.lead(F.struct("start", "start_ts", "process", "member", "epoch", "start_evidence")).over(_by_start())
    paired = terms.select(*ELECTION, latest.alias("prev"), following.alias("next")).filter(
        F.col("next").isNotNull() & (F.col("next.start") - F.col("prev.end") >= -skew)
    )
    return paired.select(
        *ELECTION,
        F.when(F.col("prev.end_reason") == "resigned", "resign").otherwise("expiry").alias("cause"),
        F.col("prev.end_reason").alias("end_reason"),
        F.col("prev.member").alias("from_member"),
        F.col("prev.epoch").alias("from_epoch"),
        F.col("next.member").alias("to_member"),
        F.col("next.epoch").alias("to_epoch"),
        F.col("prev.end_ts").alias("from_end_ts"),
        F.col("next.start_ts").alias("to_start_ts"),
        (F.col("next.start") - F.col("prev.end")).alias("gap"),
        F.array("prev.end_evidence", "next.start_evidence").alias("evidence"),
    )


def percentiles(values: DataFrame, column: str, by: str | None = None) -> list[dict[str, object]]:
    """count, p50, p95, p99, max (and mean) of ``column``, per ``by`` and for all rows."""
    stats = [
        F.count(column).alias("count"),
        F.percentile(column, [0.5, 0.95, 0.99]).alias("p"),
        F.max(column).alias("max"),
        F.mean(column).alias("mean"),
    ]
    # rollup: one job for the groups and the grand total (whose group is null).
    grouped = values.rollup(by).agg(*stats) if by is not None else values.agg(*stats).withColumn(by or "g", F.lit(None))
    rows = []
    for row in grouped.collect():
        if row["count"] == 0:
            continue
        p = row["p"] or [None, None, None]
        group = row[by or "g"] or "all"
        rows.append({"group": group, "count": row["count"], "p50": p[0], "p95": p[1], "p99": p[2],
                     "max": row["max"], "mean": row["mean"]})
    return sorted(rows, key=lambda r: (r["group"] != "all", str(r["group"])))
