"""Group membership: timelines, the duplicate-member check, churn, heartbeat-to-expiry.

All four come from one pass over each (namespace, group, member)'s events in time
order (ties broken by the emitter's seq, then file and line):
- a membership starts at ``joined`` and ends at the next ``left`` or ``expired`` for
  that member, whoever logged it (expiries are logged by the observers that saw them,
  so one expiry may be logged several times: only the first after a join counts);
- duplicate_member: a ``joined`` while the member is already in the group, unless an
  end of the earlier membership follows within ``skew`` seconds (clock skew);
- churn per hour: joins plus counted leaves and expiries;
- heartbeat-to-expiry: from the member's last ``joined``/``renewed`` to its expiry.
Not guaranteed: a membership whose end nobody logged stays open (end null).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kubecoord.analytics import schema, violations
from kubecoord.analytics.reading import evidence

MEMBER = ("namespace", "name", "member")
ORDER = ("tu", "seq", "file", "line")


@dataclass(frozen=True)
class Membership:
    timeline: DataFrame
    """One row per membership: member, process, start/end, end_reason (left/expired/open)."""
    duplicates: DataFrame
    """duplicate_member violations."""
    churn: DataFrame
    """Per group and hour: joins, leaves, expiries, churn."""
    expiries: DataFrame
    """Per counted expiry: last heartbeat, expiry time, heartbeat_to_expiry seconds."""


def analyze(events: DataFrame, skew: float) -> Membership:
    group_events = events.filter(F.col("primitive") == schema.GROUP)
    before = Window.partitionBy(*MEMBER).orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, -1)
    after = (
        Window.partitionBy(*MEMBER)
        .orderBy(*(F.col(c).desc() for c in ORDER))
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    event = F.col("event")
    is_join, is_end = event == "joined", event.isin("left", "expired")
    enriched = group_events.select(
        "*",
        F.last(F.when(is_join, F.struct("t", evidence().alias("ev"))), True).over(before).alias("last_join"),
        F.last(F.when(is_end, F.col("t")), ignorenulls=True).over(before).alias("last_end_t"),
        F.last(F.when(event.isin(*schema.HEARTBEATS), F.col("t")), ignorenulls=True).over(before).alias("last_hb_t"),
        F.last(F.when(is_end, F.struct("t", "event")), ignorenulls=True).over(after).alias("next_end"),
    )
    member_in = F.col("last_join").isNotNull() & (
        F.col("last_end_t").isNull() | (F.col("last_end_t") < F.col("last_join.t"))
    )
    enriched = enriched.withColumn("member_in", member_in).persist(StorageLevel.MEMORY_AND_DISK)

    joins = enriched.filter(is_join)
    timeline = joins.select(
        *MEMBER,
        "process",
        F.col("ts").alias("start_ts"),
        F.timestamp_seconds("next_end.t").alias("end_ts"),
        F.coalesce("next_end.event", F.lit("open")).alias("end_reason"),
        (F.col("next_end.t") - F.col("t")).alias("duration"),
    )

    duplicate = joins.filter(
        F.col("member_in") & (F.col("next_end").isNull() | (F.col("next_end.t") - F.col("t") > skew))
    )
    duplicates = violations.shape(
        duplicate,
        kind="duplicate_member",
        primitive=schema.GROUP,
        subject=F.col("member"),
        ts=F.col("ts"),
        detail=F.format_string(
            "%s joined from %s while already a member (joined at %s)",
            F.col("member"), F.col("process"), F.col("last_join.ev.ts").cast("string"),
        ),
        evidence=F.array("last_join.ev", evidence()),
    )

    counted = enriched.filter(is_join | (is_end & F.col("member_in")))
    churn = (
        counted.groupBy("namespace", "name", F.date_trunc("hour", "ts").alias("hour"))
        .agg(
            F.count(F.when(is_join, 1)).alias("joins"),
            F.count(F.when(event == "left", 1)).alias("leaves"),
            F.count(F.when(event == "expired", 1)).alias("expiries"),
            F.count("*").alias("churn"),
        )
    )
    expiries = counted.filter(event == "expired").select(
        *MEMBER,
        F.timestamp_seconds("last_hb_t").alias("last_heartbeat_ts"),
        F.col("ts").alias("expired_ts"),
        (F.col("t") - F.col("last_hb_t")).alias("heartbeat_to_expiry"),
    )
    return Membership(timeline=timeline, duplicates=duplicates, churn=churn, expiries=expiries)
