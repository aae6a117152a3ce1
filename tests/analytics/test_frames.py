"""Frames cut to one leaf (analytics.frames.cut and cached_leaf, issue 23): same rows, a
leaf's plan, the partitioning kept, computed once, released; and what building a frame
costs in py4j round trips."""

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
        total = leaf.agg(F.sum("id")).first()
        assert total is not None and total[0] == sum(range(50))
        assert calls.value == 50  # the second query read the kept rows
        assert _cached_rdds(spark) - before
    finally:
        release(leaf)
    assert not _cached_rdds(spark) - before
    release(leaf)  # twice is harmless


def test_a_cached_leaf_reads_the_cache_behind_a_plan_of_one_leaf(spark: Any) -> None:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from kubecoord.analytics.frames import cached_leaf, release

    frame = _windowed(spark).persist(StorageLevel.MEMORY_AND_DISK_DESER)
    try:
        leaf = cached_leaf(frame)
        assert sorted(leaf.collect()) == sorted(frame.collect())
        plan = leaf._jdf.queryExecution().analyzed()
        assert (plan.getClass().getSimpleName(), plan.children().size()) == ("InMemoryRelation", 0)
        query = leaf.filter(F.col("k") == 3).groupBy("k").count()
        # The plan above the cache (its string goes on with the plan it caches).
        physical = query._jdf.queryExecution().executedPlan().toString().split("InMemoryRelation")[0]
        assert "InMemoryTableScan" in physical and "Exchange" not in physical, physical  # partitioning kept
        assert query.collect()[0]["count"] == len([i for i in range(2000) if i % 13 == 3])
    finally:
        release(frame)
    assert not (frame.storageLevel.useMemory or frame.storageLevel.useDisk)


def test_a_cached_leaf_of_a_frame_not_persisted_is_refused(spark: Any) -> None:
    from kubecoord.analytics.frames import cached_leaf

    with pytest.raises(ValueError, match="not persisted"):
        cached_leaf(spark.range(3))


def test_a_cached_leaf_keeps_its_rows_when_a_twin_releases_the_cache(spark: Any) -> None:
    """Spark caches equal plans once: a second analysis of the same files persists the same
    frames, and its close() releases the cache under the first one's leaves."""
    from pyspark import StorageLevel

    from kubecoord.analytics.frames import cached_leaf, release

    frame = _windowed(spark).persist(StorageLevel.MEMORY_AND_DISK_DESER)
    leaf = cached_leaf(frame)
    expected = sorted(leaf.collect())
    twin = _windowed(spark).persist(StorageLevel.MEMORY_AND_DISK_DESER)
    release(twin)
    try:
        assert sorted(leaf.collect()) == expected  # built again from the plan it caches
    finally:
        release(frame)


def test_building_a_column_costs_no_call_site_round_trips(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With session.CALL_SITES on, PySpark sets and clears the JVM's call site around each
    function call, looking up the active session, the setting and the JVM's origin object:
    44 round trips for this column, not 14 (py4j's own lookups of each function). py4j's
    deletes of JVM objects Python let go of earlier are not the column's: a garbage
    collection may run while it is built (34 counted so, in a suite run)."""
    import gc

    import py4j.clientserver
    from pyspark.sql import functions as F

    def column() -> Any:
        return F.when(F.col("id") > 1, F.lit("big")).otherwise(F.lit("small"))

    column()  # PySpark reads the setting once per process
    calls: list[str] = []
    send = py4j.clientserver.ClientServerConnection.send_command

    def counted(connection: Any, command: str) -> Any:
        calls.append(command)
        return send(connection, command)

    gc.collect()
    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counted)
    built = column()
    monkeypatch.undo()
    built_by = [command for command in calls if not command.startswith("m\nd\n")]  # py4j's delete
    assert len(built_by) <= 20, f"{len(built_by)} round trips for five function calls and a comparison"
    assert [row[0] for row in spark.range(3).select(built).collect()] == ["small", "small", "big"]
