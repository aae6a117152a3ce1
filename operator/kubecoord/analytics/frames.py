"""Building DataFrames cheaply: small driver-side rows in the JVM, and plans cut to a leaf.

``spark.createDataFrame(list_of_tuples)`` pickles the rows and starts a Python worker per
task to read them back: about 1.8 s of a 1M-event analysis for two frames that are almost
always empty or a few rows. ``local_rows`` writes the rows into the plan as literals
instead, so reading them is JVM work only and no Python
worker starts; the executors of a cluster need no Python for it either.

Guarantees: the frame has exactly ``schema``'s column names and types (values are cast),
one row per input row, in order. For at most LITERAL_ROWS rows; more (which would make
the plan grow with the data) go through createDataFrame.

``cut`` gives a frame that later queries see as one leaf. PySpark analyses every DataFrame
as it is built, and every query over a persisted frame analyses, optimizes and plans the
whole lineage below it again before the cache stands in for it: the checks' frames carry
the read, the clock correction and their windows into each of the ~25 queries of the
summary (uncut, a 361-event history's checks take 44-50 s, ~24 s of it driver work
before the first job). A cut is a local checkpoint: computed once, by the first job that
needs it, kept by the executors (memory, then disk) and never recomputed, so an executor
lost while the analysis runs fails it (rerun); its partitioning is kept, so a grouping by
the keys it is hash-partitioned by plans no shuffle. ``release`` frees it.

``cached_leaf`` does the same for a persisted frame without a second copy: the frame's
cache itself as the leaf, so its column batches, their statistics (a filter skips batches)
and its partitioning are used, but a query over it does not analyse the lineage below
(the read's parse and the clock correction, under every check's ~1,700 DataFrame calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

LITERAL_ROWS = 1000


def local_rows(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: T.StructType) -> DataFrame:
    """``rows`` (tuples in ``schema``'s field order) as a DataFrame of ``schema``."""
    if len(rows) > LITERAL_ROWS:
        return spark.createDataFrame(list(rows), schema)
    fields = schema.fields
    if not rows:
        return spark.range(0).select(*(F.lit(None).cast(f.dataType).alias(f.name) for f in fields))
    structs = [
        F.struct(*(F.lit(value).cast(f.dataType).alias(f.name) for value, f in zip(row, fields, strict=True)))
        for row in rows
    ]
    return spark.range(1).select(F.inline(F.array(*structs)))


def cut(frame: DataFrame) -> DataFrame:
    """``frame``'s rows, computed once on first use, behind a plan of one leaf."""
    return frame.localCheckpoint(eager=False)


def cached_leaf(frame: DataFrame) -> DataFrame:
    """``frame`` (persisted) as a frame whose plan is its cache alone; release ``frame``."""
    spark = frame.sparkSession
    cached = spark._jsparkSession.sharedState().cacheManager().lookupCachedData(frame._jdf)
    if not cached.isDefined():
        raise ValueError("cached_leaf of a frame that is not persisted")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(
        spark._jsparkSession, cached.get().cachedRepresentation()), spark)


def release(frame: DataFrame) -> None:
    """Frees what ``frame.persist()`` or ``cut`` keeps of it (nothing happens twice)."""
    frame.unpersist()
    plan = frame._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
