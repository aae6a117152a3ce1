"""Many small queries collected by one Spark job (analytics.collecting, issue 23)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)


def _jobs(spark: Any, action: Any) -> tuple[Any, int]:
    """``action()``'s result and the number of Spark jobs it ran."""
    group = f"collecting-{uuid.uuid4().hex[:8]}"
    context = spark.sparkContext
    context.setJobGroup(group, "collecting test")
    try:
        result = action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return result, len(context.statusTracker().getJobIdsForGroup(group))


def test_queries_come_back_by_name_with_their_types_and_order_in_one_job(spark: Any) -> None:
    from pyspark.sql import functions as F

    from kubecoord.analytics import collecting

    frame = spark.range(1000).select(
        (F.col("id") % 7).alias("k"), (F.col("id") * 0.5).alias("x"),
        F.timestamp_seconds(F.col("id")).alias("ts"), F.array(F.col("id"), F.lit(1)).alias("a"),
    ).repartition(3)
    queries = {
        "total": frame.agg(F.count("*").alias("n"), F.sum("x").alias("sum")),
        "by_k": frame.groupBy("k").agg(F.max("ts").alias("last"), F.percentile("x", [0.5]).alias("p")),
        "top": frame.orderBy(F.col("x").desc()).limit(5).select("x", "a"),
        "none": frame.filter(F.col("k") > 100).groupBy("k").count(),
        "nulls": frame.limit(1).select(F.lit(None).cast("string").alias("s")),
    }
    rows, jobs = _jobs(spark, lambda: collecting.collect(queries))

    assert jobs == 1  # one action: the union of all five, not one job (or more) per query
    assert set(rows) == set(queries)
    assert [(r["n"], r["sum"]) for r in rows["total"]] == [(1000, 0.5 * 999 * 1000 / 2)]
    expected = {r["k"]: (r["last"], r["p"]) for r in queries["by_k"].collect()}
    assert {r["k"]: (r["last"], r["p"]) for r in rows["by_k"]} == expected  # timestamps and arrays kept
    assert [r["x"] for r in rows["top"]] == [499.5, 499.0, 498.5, 498.0, 497.5]  # the top-N's own order
    assert rows["top"][0]["a"] == [999, 1]
    assert rows["none"] == []
    assert [r["s"] for r in rows["nulls"]] == [None]  # a row of nulls is still a row
    assert collecting.collect({}) == {}
