"""The whole analysis: inputs -> tables and a summary, without writing anything.

Guarantees: every table is a DataFrame whose columns do not depend on the data (an
election-free log gives empty leadership tables, not missing ones); the summary is
plain JSON-ready data. EmptyInputError when there is no valid event at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kubecoord.analytics import kv, leadership, membership, schema, violations
from kubecoord.analytics.progress import Progress
from kubecoord.analytics.reading import EmptyInputError, expand_inputs, read_events
from kubecoord.history import rfc3339

DEFAULT_SKEW = 1.0
MALFORMED_EXAMPLES = 50


@dataclass
class Analysis:
    tables: dict[str, DataFrame]
    summary: dict[str, Any]
    events: DataFrame
    unpersist: list[DataFrame] = field(default_factory=list)
    """Persisted frames to release in close()."""

    @property
    def violation_count(self) -> int:
        return int(sum(self.summary["violations"].values()))

    def close(self) -> None:
        for frame in self.unpersist:
            frame.unpersist()


def analyze(
    spark: SparkSession, inputs: Sequence[str], *, skew: float = DEFAULT_SKEW, progress: Progress | None = None
) -> Analysis:
    progress = progress or Progress("analyze", enabled=False)
    files = expand_inputs(spark, inputs)
    progress.step(f"reading {len(files)} file(s)")
    read = read_events(spark, files)
    events = read.events
    valid = F.col("reason").isNull()
    counts = read.lines.agg(
        F.count(F.when(valid, 1)).alias("events"),
        F.count(F.when(~valid, 1)).alias("malformed"),
        F.min(F.when(valid, F.col("t"))).alias("first"),
        F.max(F.when(valid, F.col("t"))).alias("last"),
        F.countDistinct(F.when(valid, F.col("process"))).alias("processes"),
    ).first()
    assert counts is not None
    malformed_count = counts["malformed"]
    progress.step(f"{counts['events']} events, {malformed_count} malformed line(s)")
    if counts["events"] == 0:
        detail = f" ({malformed_count} malformed line(s))" if malformed_count else ""
        raise EmptyInputError(f"no valid events in {len(files)} file(s){detail}")

    terms = leadership.intervals(events).persist(StorageLevel.MEMORY_AND_DISK)
    gaps = leadership.failover_gaps(terms, skew).persist(StorageLevel.MEMORY_AND_DISK)
    groups = membership.analyze(events, skew)
    stores = kv.analyze(events, skew)
    cached = [frame.persist(StorageLevel.MEMORY_AND_DISK) for frame in (groups.churn, stores.per_key)]
    cached.append(groups.persisted)
    found = violations.union([
        leadership.overlaps(terms, skew),
        leadership.epoch_regressions(events, skew),
        groups.duplicates,
        stores.backwards,
        stores.lost_updates,
    ]).persist(StorageLevel.MEMORY_AND_DISK)
    progress.step("checking safety")
    by_type = {row["type"]: row["count"] for row in found.groupBy("type").count().collect()}
    progress.step("computing metrics")
    summary = {
        "schema_version": schema.SCHEMA_VERSION,
        "skew_tolerance_seconds": skew,
        "inputs": {
            "files": len(files),
            "events": counts["events"],
            "malformed_lines": malformed_count,
            "processes": counts["processes"],
            "first_event": _iso(counts["first"]),
            "last_event": _iso(counts["last"]),
        },
        "violations": {kind: int(by_type.get(kind, 0)) for kind in schema.VIOLATION_TYPES},
        "leadership": _leadership_summary(terms, gaps),
        "membership": _membership_summary(groups),
        "kv": _kv_summary(stores),
        "malformed_examples": [
            row.asDict() for row in read.malformed.orderBy("file", "line").limit(MALFORMED_EXAMPLES).collect()
        ],
    }
    tables = {
        "violations": found,
        "leadership_intervals": terms,
        "failover_gaps": gaps,
        "membership_timeline": groups.timeline,
        "membership_churn": groups.churn,
        "heartbeat_to_expiry": groups.expiries,
        "kv_keys": stores.per_key,
        "kv_stores": stores.per_store,
        "malformed_lines": read.malformed,
    }
    return Analysis(tables=tables, summary=summary, events=events, unpersist=[found, gaps, terms, read.lines, *cached])


def _iso(seconds: float | None) -> str | None:
    # From UNIX seconds, not a collected timestamp: PySpark hands those back in the
    # driver's local time zone.
    return None if seconds is None else rfc3339(seconds)


def _leadership_summary(terms: DataFrame, gaps: DataFrame) -> dict[str, Any]:
    row = terms.agg(F.count("*").alias("terms"), F.countDistinct("namespace", "name").alias("elections")).first()
    assert row is not None
    return {
        "elections": row["elections"],
        "terms": row["terms"],
        "failover_gap_seconds": leadership.percentiles(gaps, "gap", by="cause"),
    }


def _membership_summary(groups: membership.Membership) -> dict[str, Any]:
    row = groups.churn.agg(
        F.countDistinct("namespace", "name").alias("groups"),
        F.sum("joins").alias("joins"),
        F.sum("leaves").alias("leaves"),
        F.sum("expiries").alias("expiries"),
        F.max("churn").alias("max_churn_per_hour"),
    ).first()
    assert row is not None
    summary = {key: (row[key] or 0) for key in ("groups", "joins", "leaves", "expiries", "max_churn_per_hour")}
    summary["heartbeat_to_expiry_seconds"] = leadership.percentiles(groups.expiries, "heartbeat_to_expiry")
    return summary


def _kv_summary(stores: kv.Storage) -> dict[str, Any]:
    row = stores.per_store.agg(
        F.count("*").alias("stores"),
        F.sum("keys").alias("keys"),
        F.sum("operations").alias("operations"),
        F.sum("conflicts").alias("conflicts"),
    ).first()
    assert row is not None
    operations, conflicts = row["operations"] or 0, row["conflicts"] or 0
    return {
        "stores": row["stores"],
        "keys": row["keys"] or 0,
        "operations": operations,
        "conflicts": conflicts,
        "conflict_rate": (conflicts / operations) if operations else 0.0,
    }
