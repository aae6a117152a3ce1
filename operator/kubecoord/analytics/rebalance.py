"""Group coordinator checks: who held which unit when, stale generations, rebalance times.

Input: the events of primitive ``group_coordinator`` (``rebalance_started``,
``rebalance_completed``, ``assigned`` with the member's whole assignment of a
generation, ``revoked`` with the units given up, ``fenced`` when the leader dropped a departed
member's claim on its units) and the ``group`` primitive's ``left``/``expired`` of the
same members (a member that is gone holds nothing: a killed process logs no revocation,
and where no observer logs its expiry, as on ZooKeeper, the leader's ``fenced`` ends it).

- holdings: one row per (member, unit) holding, from the first ``assigned`` that lists
  the unit to the first ``revoked`` listing it or the member's departure or fencing
  (else open);
- ``unit_owned_twice``: two members' holdings of one unit overlap by more than the skew;
- ``stale_generation_work``: a member logs ``assigned`` for generation g more than the
  skew after some member of the group logged ``assigned`` for a later generation (it
  started on a generation the group had left behind);
- rebalance durations: per generation, from its first ``rebalance_started`` to the last
  ``assigned`` of it.

Not checked: work done between events (a member's own fencing, ensure_generation(), is
what guards that); units of protocols that log none (opaque assignments).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kubecoord.analytics import violations
from kubecoord.analytics.reading import LINE_ORDER, ORDER
from kubecoord.wire.events import DEPARTURES, Event, Primitive

GROUP_KEY = ("namespace", "name")


@dataclass(frozen=True)
class Rebalances:
    holdings: DataFrame
    """namespace, name, member, unit, generation, start_ts, end_ts, end_reason (revoked,
    member_gone, fenced or open)."""
    rebalances: DataFrame
    """namespace, name, generation, started_ts, completed_ts, duration, members."""
    owned_twice: DataFrame
    stale: DataFrame


def analyze(events: DataFrame, skew: float) -> Rebalances:
    coordinator = events.filter(F.col("primitive") == Primitive.GROUP_COORDINATOR)
    units = F.from_json(F.col("units"), "array<string>")
    changes = (
        coordinator.filter(F.col("event").isin(Event.ASSIGNED, Event.REVOKED) & units.isNotNull())
        .select("*", F.explode(units).alias("unit"), F.col("rid").alias("ev"))
    )
    key = Window.partitionBy(*GROUP_KEY, "member", "unit").orderBy(*ORDER)
    after = key.rowsBetween(1, Window.unboundedFollowing)
    marked = changes.select(
        *GROUP_KEY, "member", "unit", "generation", "event", "t", "ts", "ev",
        F.lag("event").over(key).alias("previous"),
        F.first(F.when(F.col("event") == Event.REVOKED, F.struct("t", "ts")), True).over(after).alias("revocation"),
    )
    first_or_after_revocation = F.col("previous").isNull() | (F.col("previous") == Event.REVOKED)
    starts = marked.filter((F.col("event") == Event.ASSIGNED) & first_or_after_revocation)
    departed = (F.col("primitive") == Primitive.GROUP) & F.col("event").isin(*DEPARTURES)
    fenced = (F.col("primitive") == Primitive.GROUP_COORDINATOR) & (F.col("event") == Event.FENCED)
    gone = events.filter(departed | fenced).select(
        *GROUP_KEY, "member", F.col("t").alias("gone_t"), F.col("ts").alias("gone_ts"),
        F.when(F.col("event") == Event.FENCED, "fenced").otherwise("member_gone").alias("gone_reason"),
    )
    departures = (
        starts.join(gone, [*GROUP_KEY, "member"], "left")
        .filter(F.col("gone_t").isNull() | (F.col("gone_t") >= F.col("t")))
        .groupBy(*GROUP_KEY, "member", "unit", "t")
        .agg(F.min(F.struct("gone_t", "gone_ts", "gone_reason")).alias("departure"))
    )
    joined = starts.join(departures, [*GROUP_KEY, "member", "unit", "t"], "left")
    revoked_t, gone_t = F.col("revocation.t"), F.col("departure.gone_t")
    ends_by_revocation = revoked_t.isNotNull() & (gone_t.isNull() | (revoked_t <= gone_t))
    holdings = joined.select(
        *GROUP_KEY, "member", "unit", "generation", "ev",
        F.col("t").alias("start"), F.col("ts").alias("start_ts"),
        F.when(ends_by_revocation, revoked_t).otherwise(gone_t).alias("end"),
        F.when(ends_by_revocation, F.col("revocation.ts")).otherwise(F.col("departure.gone_ts")).alias("end_ts"),
        F.when(ends_by_revocation, "revoked").when(gone_t.isNotNull(), F.col("departure.gone_reason")).otherwise("open")
        .alias("end_reason"),
    )

    a, b = holdings.alias("a"), holdings.alias("b")
    overlapping = a.join(
        b,
        (F.col("a.namespace") == F.col("b.namespace")) & (F.col("a.name") == F.col("b.name"))
        & (F.col("a.unit") == F.col("b.unit")) & (F.col("a.member") != F.col("b.member"))
        & ((F.col("b.start") > F.col("a.start"))
           | ((F.col("b.start") == F.col("a.start")) & (F.col("b.member") > F.col("a.member"))))
        & (F.col("a.end").isNull() | (F.col("b.start") < F.col("a.end") - F.lit(skew))),
    ).select(
        F.col("a.namespace").alias("namespace"), F.col("a.name").alias("name"),
        F.col("b.unit").alias("unit"), F.col("a.member").alias("first"), F.col("b.member").alias("second"),
        F.col("a.end_ts").alias("first_end_ts"), F.col("b.start_ts").alias("second_start_ts"),
        F.col("a.ev").alias("first_ev"), F.col("b.ev").alias("second_ev"),
    )
    owned_twice = violations.shape(
        overlapping, kind="unit_owned_twice", primitive=Primitive.GROUP_COORDINATOR, subject=F.col("unit"),
        ts=F.col("second_start_ts"),
        detail=F.format_string(
            "unit %s given to %s at %s while %s held it (until %s)", F.col("unit"), F.col("second"),
            F.col("second_start_ts").cast("string"), F.col("first"),
            F.coalesce(F.col("first_end_ts").cast("string"), F.lit("the end of the log")),
        ),
        evidence=F.array("first_ev", "second_ev"),
    )

    assigned = coordinator.filter((F.col("event") == Event.ASSIGNED) & F.col("generation").isNotNull())
    earlier = violations.earlier_than(skew, *GROUP_KEY)
    newest = F.max(F.struct("generation", *LINE_ORDER, "member")).over(earlier)
    flagged = assigned.select("*", newest.alias("newest")).filter(F.col("newest.generation") > F.col("generation"))
    stale = violations.shape(
        flagged, kind="stale_generation_work", primitive=Primitive.GROUP_COORDINATOR, subject=F.col("member"),
        ts=F.col("ts"),
        detail=F.format_string(
            "%s started on generation %d after generation %d was assigned (%s)", F.col("member"),
            F.col("generation"), F.col("newest.generation"), F.col("newest.member"),
        ),
        evidence=F.array("newest.rid", "rid"),
    )

    per_generation = coordinator.filter(F.col("generation").isNotNull()).groupBy(*GROUP_KEY, "generation").agg(
        F.min(F.when(F.col("event") == Event.REBALANCE_STARTED, F.col("t"))).alias("started"),
        F.max(F.when(F.col("event") == Event.ASSIGNED, F.col("t"))).alias("completed"),
        F.countDistinct(F.when(F.col("event") == Event.ASSIGNED, F.col("member"))).alias("members"),
    )
    rebalances = per_generation.filter(F.col("started").isNotNull() & F.col("completed").isNotNull()).select(
        *GROUP_KEY, "generation",
        F.timestamp_seconds("started").alias("started_ts"), F.timestamp_seconds("completed").alias("completed_ts"),
        (F.col("completed") - F.col("started")).alias("duration"), "members",
    )
    return Rebalances(holdings=holdings.drop("ev"), rebalances=rebalances, owned_twice=owned_twice, stale=stale)
