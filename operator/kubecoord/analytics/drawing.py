"""What the report draws, as small queries collected with the summary's (no Spark in report).

The report (analytics.report) draws from a few small results: the failover-gap quantiles
per cause, the elections to draw and the first TIMELINE_TERMS terms of each with their
overlaps, membership changes per time bin, rebalances with the units they moved, the
top elections and conflicting keys, the longest overlaps. ``queries`` gives them to the
pipeline, which collects them in the summary's one collect (collecting.collect), so the
report runs no Spark query of its own (collected by the report itself they would be two
collects and six Spark jobs more).

The elections drawn are chosen inside the plan: the top TIMELINE_ELECTIONS of the
``elections`` table (most violations, then the longest gap, then by name: a total order,
so the choice is the same whichever way it is computed) are broadcast and joined to the
terms and overlaps, instead of collected first and sent back as literals.

Guarantees: every name in NAMES is in the collected rows (empty lists when there is
nothing to draw); ``overlaps`` only when the analysis has overlap windows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

APPROX_QUANTILES = 200
TIMELINE_ELECTIONS = 6
TIMELINE_TERMS = 400
ELECTION_ROWS = 50
CONFLICT_ROWS = 20
OVERLAP_PLOTS = 6
TIME_BINS = 60
BIN_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
PREFIX = "report."
"""The report's query names in the collected rows (the summary's have their check's prefix)."""
ELECTION = ("namespace", "name")


def bin_seconds(span: float) -> int:
    """The bin width for a history of ``span`` seconds: the smallest of BIN_SECONDS giving
    at most TIME_BINS bins."""
    return next((width for width in BIN_SECONDS if span / width <= TIME_BINS), BIN_SECONDS[-1])


def span(first_event: str, last_event: str) -> tuple[float, float]:
    """The summary's first and last event times (RFC 3339 UTC text) as UNIX seconds."""
    first, last = (dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
                   for text in (first_event, last_event))
    return first, last


def queries(tables: Mapping[str, DataFrame], overlaps: DataFrame | None, *, width: int) -> dict[str, DataFrame]:
    """Every query of the report, by PREFIX + name; ``width``: the churn bins' seconds."""
    fractions = [(i + 1) / APPROX_QUANTILES for i in range(APPROX_QUANTILES)]
    elections = tables["elections"]
    chosen = _timeline_query(elections)
    found = {
        "gap_cdf": tables["failover_gaps"].groupBy("cause").agg(
            F.count("*").alias("n"), F.percentile_approx("gap", fractions, 10_000).alias("q")),
        "timeline": chosen,
        "terms": _timeline_terms(tables["leadership_intervals"], chosen),
        "churn": _churn_query(tables["membership_timeline"], width),
        "rebalances": _rebalance_query(tables["unit_holdings"], tables["rebalances"]),
        "elections": elections.orderBy(
            F.col("violations").desc(), F.col("leaderless_seconds").desc(), "namespace", "name"
        ).limit(ELECTION_ROWS),
        "conflicts": tables["kv_keys"].orderBy(F.col("conflicts").desc(), "namespace", "name", "key")
        .limit(CONFLICT_ROWS),
    }
    if overlaps is not None:
        found["overlaps"] = overlaps.orderBy(
            (F.col("end") - F.col("start")).desc(), "namespace", "name", "start").limit(OVERLAP_PLOTS)
        found["timeline_overlaps"] = overlaps.join(F.broadcast(chosen.select(*ELECTION)), list(ELECTION), "left_semi")
    return {PREFIX + name: query for name, query in found.items()}


def _timeline_query(elections: DataFrame) -> DataFrame:
    return elections.orderBy(
        F.col("violations").desc(), F.col("gap_max").desc_nulls_last(), "namespace", "name"
    ).limit(TIMELINE_ELECTIONS).select("namespace", "name", "violations")


def _timeline_terms(terms: DataFrame, chosen: DataFrame) -> DataFrame:
    """The first TIMELINE_TERMS terms (by start) of each election drawn."""
    by_start = Window.partitionBy(*ELECTION).orderBy("start")
    return (terms.join(F.broadcast(chosen.select(*ELECTION)), list(ELECTION), "left_semi")
            .withColumn("n", F.row_number().over(by_start)).filter(F.col("n") <= TIMELINE_TERMS)
            .select("namespace", "name", "member", "epoch", "start", "end"))


def _churn_query(timeline: DataFrame, width: int) -> DataFrame:
    changes = timeline.select(F.col("start_ts").alias("ts"), F.lit("joins").alias("kind")).unionByName(
        timeline.filter(F.col("end_reason").isin("left", "expired")).select(
            F.col("end_ts").alias("ts"),
            F.when(F.col("end_reason") == "left", "leaves").otherwise("expiries").alias("kind")))
    binned = F.floor(F.unix_micros("ts") / F.lit(width * 1_000_000)) * width
    return changes.groupBy(binned.alias("bin"), "kind").count()


def _rebalance_query(holdings: DataFrame, rebalances: DataFrame) -> DataFrame:
    """One row per rebalance (group, generation): start, duration, members, units moved
    (units whose holding of this generation follows another member's holding)."""
    before = Window.partitionBy("namespace", "name", "unit").orderBy("start", "generation", "member")
    previous = F.lag("member").over(before)
    moved = holdings.select("namespace", "name", "generation",
                            (previous.isNotNull() & (previous != F.col("member"))).cast("int").alias("moved"))
    per_generation = moved.groupBy("namespace", "name", "generation").agg(
        F.sum("moved").alias("units_moved"), F.count("*").alias("units_assigned"))
    return rebalances.join(per_generation, ["namespace", "name", "generation"], "left").select(
        "namespace", "name", "generation", F.unix_micros("started_ts").alias("started_us"), "duration", "members",
        F.coalesce("units_moved", F.lit(0)).alias("units_moved"),
        F.coalesce("units_assigned", F.lit(0)).alias("units_assigned"),
    )
