"""Small driver-side rows as a DataFrame, built in the JVM.

``spark.createDataFrame(list_of_tuples)`` pickles the rows and starts a Python worker per
task to read them back: about 1.8 s of a 1M-event analysis went to that for two frames
that are almost always empty or a few rows (issue 23's profile). ``local_rows`` writes the
rows into the plan as literals instead, so reading them is JVM work only and no Python
worker starts; the executors of a cluster need no Python for it either.

Guarantees: the frame has exactly ``schema``'s column names and types (values are cast),
one row per input row, in order. For at most LITERAL_ROWS rows; more (which would make
the plan grow with the data) go through createDataFrame as before.
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
