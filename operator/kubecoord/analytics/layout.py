"""How an analysis's tables are laid out on disk: a few Parquet tables, each with a ``type``.

An analysis has fourteen tables in memory (``Analysis.tables``: the checks' findings by
name). Written one by one they would be fourteen Spark jobs, each with its plan and
planning pause (18 of 30 jobs of a 1M-event analysis), so they are written as four
(WRITTEN): ``violations`` (already one table whatever the check, its ``type`` the
violation type), ``intervals`` (everything with a start and an end: leadership terms,
failover gaps, memberships, heartbeat-to-expiry, unit holdings, rebalances, seq gaps),
``metrics`` (the per-election, per-group-hour, per-key and per-store figures) and
``input_problems`` (malformed lines and unreadable files). In a combined table each row's
``type`` is the name of the in-memory table it came from, and its other columns are the
union of its members' columns (a column a member lacks is null in its rows).

Guarantees: every in-memory table's rows are recoverable from the written table by its
``type``: ``split`` (or ``read``) gives back each member table with exactly its own
columns, in its own order and with its own types (nullability aside), from the column
list recorded in the ``type`` column's metadata, which Parquet keeps. Members sharing a
column name share its type (checked when combining: ``LayoutError`` otherwise). A table
this module does not place is refused, not dropped. Not guaranteed: row order (as for any
table).

Reading one kind of row back with Spark, e.g. the failover gaps::

    spark.read.parquet("OUT/tables/intervals").where("type = 'failover_gaps'")
    # or, with exactly that kind's own columns:
    from kubecoord.analytics import layout
    layout.read(spark, "OUT/tables")["failover_gaps"]
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

TYPE = "type"
MEMBERS = "kubecoord.members"
"""Metadata key of the ``type`` column: member table name -> its columns, in order."""

WRITTEN: dict[str, tuple[str, ...]] = {
    "violations": ("violations",),
    "intervals": ("leadership_intervals", "failover_gaps", "membership_timeline", "heartbeat_to_expiry",
                  "unit_holdings", "rebalances", "seq_gaps"),
    "metrics": ("elections", "membership_churn", "kv_keys", "kv_stores"),
    "input_problems": ("malformed_lines", "unreadable_files"),
}
"""Written table -> the in-memory tables it holds. A one-member table whose name is its
member's is written as it is (``violations`` has a ``type`` column of its own)."""


class LayoutError(ValueError):
    """Tables that cannot be combined as WRITTEN says (a stray table, clashing columns)."""


def combine(tables: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
    """The in-memory tables -> the written ones (WRITTEN), each a plan over its members."""
    placed = {member for members in WRITTEN.values() for member in members}
    stray = sorted(set(tables) - placed)
    if stray:
        raise LayoutError(f"tables with no place in the written layout: {', '.join(stray)}")
    written: dict[str, DataFrame] = {}
    for name, members in WRITTEN.items():
        present = [member for member in members if member in tables]
        if present == [name]:
            written[name] = tables[name]
        elif present:
            written[name] = _combined({member: tables[member] for member in present})
    return written


def _combined(members: Mapping[str, DataFrame]) -> DataFrame:
    types: dict[str, tuple[str, str]] = {}
    for member, frame in members.items():
        if TYPE in frame.columns:
            raise LayoutError(f"table {member} has a column named {TYPE!r} of its own")
        for field in frame.schema.fields:
            seen = types.setdefault(field.name, (member, field.dataType.simpleString()))
            if seen[1] != field.dataType.simpleString():
                raise LayoutError(f"column {field.name!r} is {seen[1]} in {seen[0]} but "
                                  f"{field.dataType.simpleString()} in {member}")
    recorded = json.dumps({member: frame.columns for member, frame in members.items()})
    tagged = [frame.select(F.lit(member).alias(TYPE), *frame.columns) for member, frame in members.items()]
    union = reduce(lambda left, right: left.unionByName(right, allowMissingColumns=True), tagged)
    return union.withMetadata(TYPE, {MEMBERS: recorded})


def split(written: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
    """Written tables (as read back) -> the in-memory tables, each with its own columns."""
    tables: dict[str, DataFrame] = {}
    for name, frame in written.items():
        members = _members(frame)
        if members is None:
            tables[name] = frame
            continue
        for member, columns in members.items():
            tables[member] = frame.where(F.col(TYPE) == member).select(*columns)
    return tables


def read(spark: SparkSession, tables_dir: str) -> dict[str, DataFrame]:
    """An output's ``tables`` directory (any Hadoop path) -> the in-memory tables by name."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    root = jvm.org.apache.hadoop.fs.Path(tables_dir)
    fs = root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    names = sorted(status.getPath().getName() for status in fs.listStatus(root) if status.isDirectory())
    return split({name: spark.read.parquet(_literal(f"{tables_dir.rstrip('/')}/{name}"))
                  for name in names if not name.startswith((".", "_"))})


def _literal(path: str) -> str:
    """A path for Spark's readers, which take glob patterns: ``[``, ``{``, ``*``... escaped."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def _members(frame: DataFrame) -> dict[str, list[str]] | None:
    if TYPE not in frame.columns:
        return None
    recorded = frame.schema[TYPE].metadata.get(MEMBERS)
    return None if recorded is None else dict(json.loads(recorded))
