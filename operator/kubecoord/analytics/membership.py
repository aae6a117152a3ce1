"""Group membership: timelines, the duplicate-member check, churn, heartbeat-to-expiry.

All four come from each (namespace, group, member)'s events in time order (ties broken
by the emitter's seq, then file and line):
- a membership starts at ``joined`` (by the joining process; an observer's ``joined``,
  wire.events.OBSERVERS, only says when it saw the member arrive and is left out) and ends at that process's next
  ``left`` or the member's next ``expired``, whoever logged it (expiries are logged by
  the observers that saw them, so one expiry may be logged several times: only the
  first while the member is in counts);
- duplicate_member: a ``joined`` while the member is already in the group, unless an
  end of the earlier membership follows within ``skew`` seconds (clock skew);
- churn per hour: joins plus counted leaves and expiries;
- heartbeat-to-expiry: from the member's last ``joined``/``renewed`` to its expiry.
Not guaranteed: a membership whose end nobody logged stays open (end null).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from kubecoord.analytics import violations
from kubecoord.analytics.frames import cut
from kubecoord.analytics.reading import ORDER
from kubecoord.wire.events import DEPARTURES, HEARTBEATS, MEMBERSHIP_CHANGES, OBSERVERS, Event, Primitive

MEMBER = ("namespace", "name", "member")
CHANGE_KEY = ("namespace", "name", "rid")
"""An event's identity within its group (its row id: a line is one event; copies are dropped before)."""


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
    persisted: DataFrame
    """The per-event pass the others derive from (persisted; release it when done)."""


def _window(*partition: str, ascending: bool) -> WindowSpec:
    """Rows of ``partition`` strictly before (ascending) or after (descending) the current one."""
    order = [F.col(c) if ascending else F.col(c).desc() for c in ORDER]
    return Window.partitionBy(*partition).orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)


def _passes(group_events: DataFrame) -> DataFrame:
    """Each group event with what its member's (and its process's) events before and after
    it say: last_join (t, ev), last_end_t, last_expired_t, last_hb_t, next_end and
    next_expired (t, event), own_join_t, own_left_t, own_next_left (t, event)."""
    before, after = _window(*MEMBER, ascending=True), _window(*MEMBER, ascending=False)
    own_before, own_after = _window(*MEMBER, "process", ascending=True), _window(*MEMBER, "process", ascending=False)
    event, t = F.col("event"), F.col("t")
    is_join, is_end = event == Event.JOINED, event.isin(*DEPARTURES)
    # Most group events are heartbeats; only the last heartbeat before an expiry needs them.
    # Every other figure is read at a join, leave or expiry and made of joins, leaves and
    # expiries: it is computed over those alone (a window's last non-null value before or
    # after a row is the same without the rows where it is null), so only one window
    # order sorts every event, not four.
    changes = group_events.filter(event.isin(*MEMBERSHIP_CHANGES)).select(
        *CHANGE_KEY,
        F.last(F.when(is_end, F.struct("t", "event")), True).over(after).alias("next_end"),
        F.last(F.when(event == Event.EXPIRED, F.struct("t", "event")), True).over(after).alias("next_expired"),
        F.last(F.when(is_join, t), True).over(own_before).alias("own_join_t"),
        F.last(F.when(event == Event.LEFT, t), True).over(own_before).alias("own_left_t"),
        F.last(F.when(event == Event.LEFT, F.struct("t", "event")), True).over(own_after).alias("own_next_left"),
    )
    return group_events.select(
        "*",
        F.last(F.when(is_join, F.struct("t", "ts", "rid")), True).over(before).alias("last_join"),
        F.last(F.when(is_end, t), True).over(before).alias("last_end_t"),
        F.last(F.when(event == Event.EXPIRED, t), True).over(before).alias("last_expired_t"),
        F.last(F.when(event.isin(*HEARTBEATS), t), True).over(before).alias("last_hb_t"),
    ).join(changes.hint("shuffle_hash"), list(CHANGE_KEY), "left")  # both partitioned by (namespace, name)


def analyze(events: DataFrame, skew: float) -> Membership:
    observed_arrival = (F.col("event") == Event.JOINED) & F.col("source").isin(*OBSERVERS)
    group_events = events.filter(
        (F.col("primitive") == Primitive.GROUP) & F.col("event").isin(*MEMBERSHIP_CHANGES, *HEARTBEATS)
        & ~F.coalesce(observed_arrival, F.lit(False))
    )
    enriched = _passes(group_events)
    event = F.col("event")
    is_join = event == Event.JOINED
    # Someone's membership is open (for joins and expiries) / this process's is (for leaves).
    member_in = F.col("last_join").isNotNull() & (
        F.col("last_end_t").isNull() | (F.col("last_end_t") < F.col("last_join.t"))
    )
    own_in = F.col("own_join_t").isNotNull() & (
        F.col("own_join_t") > F.greatest(F.col("own_left_t"), F.col("last_expired_t"), F.lit(float("-inf")))
    )
    enriched = cut(
        enriched.withColumn("member_in", member_in)
        .withColumn("own_in", own_in)
        .withColumn("end", F.least("own_next_left", "next_expired"))
    )

    joins = enriched.filter(is_join)
    timeline = joins.select(
        *MEMBER,
        "process",
        F.col("ts").alias("start_ts"),
        F.timestamp_seconds("end.t").alias("end_ts"),
        F.coalesce("end.event", F.lit("open")).alias("end_reason"),
        (F.col("end.t") - F.col("t")).alias("duration"),
    )

    duplicate = joins.filter(
        F.col("member_in") & (F.col("next_end").isNull() | (F.col("next_end.t") - F.col("t") > skew))
    )
    duplicates = violations.shape(
        duplicate,
        kind="duplicate_member",
        primitive=Primitive.GROUP,
        subject=F.col("member"),
        ts=F.col("ts"),
        detail=F.format_string(
            "%s joined from %s while already a member (joined at %s)",
            F.col("member"), F.col("process"), F.col("last_join.ts").cast("string"),
        ),
        evidence=F.array("last_join.rid", "rid"),
    )

    counted = enriched.filter(
        is_join | ((event == Event.LEFT) & F.col("own_in")) | ((event == Event.EXPIRED) & F.col("member_in"))
    )
    churn = (
        counted.groupBy("namespace", "name", F.date_trunc("hour", "ts").alias("hour"))
        .agg(
            F.count(F.when(is_join, 1)).alias("joins"),
            F.count(F.when(event == Event.LEFT, 1)).alias("leaves"),
            F.count(F.when(event == Event.EXPIRED, 1)).alias("expiries"),
            F.count("*").alias("churn"),
        )
    )
    expiries = counted.filter(event == Event.EXPIRED).select(
        *MEMBER,
        F.timestamp_seconds("last_hb_t").alias("last_heartbeat_ts"),
        F.col("ts").alias("expired_ts"),
        (F.col("t") - F.col("last_hb_t")).alias("heartbeat_to_expiry"),
    )
    return Membership(timeline=timeline, duplicates=duplicates, churn=churn, expiries=expiries, persisted=enriched)
