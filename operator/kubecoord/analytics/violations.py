"""The shape every safety violation takes, whichever metric finds it.

One row per violation: ``type`` (kubecoord.wire.events.VIOLATION_TYPES), ``namespace``, ``primitive``,
``name``, ``subject`` (member or key), ``ts`` (when it happened), ``detail`` (one human
sentence) and ``evidence``: the event rows that prove it, each with its file and line. A
check gives the evidence as the events' row ids (``rid``), so that its windows, sorts and
aggregates hold numbers only; the pipeline turns them into the events' evidence rows once,
for all the checks' violations (reading.evidence_arrays).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F


def shape(
    rows: DataFrame, *, kind: str, primitive: str, subject: Column, ts: Column, detail: Column, evidence: Column
) -> DataFrame:
    """``rows`` (one per violation found) -> the common violation columns; ``evidence`` is an
    array of row ids."""
    return rows.select(
        F.lit(kind).alias("type"),
        "namespace",
        F.lit(primitive).alias("primitive"),
        "name",
        subject.cast("string").alias("subject"),
        ts.alias("ts"),
        detail.alias("detail"),
        evidence.alias("evidence"),
    )


def union(frames: list[DataFrame]) -> DataFrame:
    return reduce(lambda left, right: left.unionByName(right), frames)


def earlier_than(skew: float, *partition: str) -> WindowSpec:
    """The rows of ``partition`` logged more than ``skew`` seconds before the current one
    (by the ``tu`` microseconds column): what a check may compare against without being
    fooled by clock differences."""
    skew_us = round(skew * 1e6)
    return Window.partitionBy(*partition).orderBy("tu").rangeBetween(Window.unboundedPreceding, -(skew_us + 1))


def seconds(column: Column | str) -> Column:
    """A duration in seconds as text with millisecond precision, for details."""
    return F.format_number(column, 3)
