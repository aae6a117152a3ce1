"""Frames cut to one leaf (analytics.frames.cut, issue 23): same rows, a leaf's plan, the
partitioning kept, computed once, released."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)


def _windowed(spark: Any) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_key = Window.partitionBy("k").orderBy("id")
    return spark.range(2000).select("id", (F.col("id") % 13).alias("k")).repartition(4, "k").select(
        "id", "k", F.lag("id").over(by_key).alias("previous"), F.sum("id").over(by_key).alias("running"))


def _cached_rdds(spark: Any) -> set[int]:
    return {info.id() for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()}


def test_a_cut_frame_has_the_same_rows_behind_a_plan_of_one_leaf(spark: Any) -> None:
    from kubecoord.analytics.frames import cut, release

    frame = _windowed(spark)
    leaf = cut(frame)
    try:
        assert sorted(leaf.collect()) == sorted(frame.collect())
        analyzed = leaf.groupBy("k").count()._jdf.queryExecution().analyzed().toString()
        assert "LogicalRDD" in analyzed
        assert "Window" not in analyzed and "Range" not in analyzed
    finally:
        release(leaf)


def test_a_cut_keeps_the_partitioning_so_grouping_by_its_keys_does_not_shuffle(spark: Any) -> None:
    from kubecoord.analytics.frames import cut, release

    leaf = cut(_windowed(spark))
    try:
        physical = leaf.groupBy("k").count()._jdf.queryExecution().executedPlan().toString()
        assert "Exchange" not in physical, physical
    finally:
        release(leaf)


def test_a_cut_is_computed_once_and_released(spark: Any) -> None:
    from pyspark.sql import functions as F

    from kubecoord.analytics.frames import cut, release

    calls = spark.sparkContext.accumulator(0)
    counted = F.udf(lambda value: (calls.add(1), value)[1], "long", useArrow=False)
    before = _cached_rdds(spark)
    leaf = cut(spark.range(50).select(counted("id").alias("id")))
    try:
        assert leaf.count() == 50
        assert leaf.agg(F.sum("id")).first()[0] == sum(range(50))
        assert calls.value == 50  # the second query read the kept rows
        assert _cached_rdds(spark) - before
    finally:
        release(leaf)
    assert not _cached_rdds(spark) - before
    release(leaf)  # twice is harmless
