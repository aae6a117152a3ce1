"""Many small query results, collected by one Spark job.

The summary and the report are made of small queries (a total, percentiles, a top ten,
counts by type) over the checks' tables. Collected one by one, each is a Spark action
with a plan, a planning pause on the driver and jobs of its own (17 jobs for the four
checks' totals alone, 22 for the report's queries). ``collect``
runs them together instead: each query's rows become a struct in a column of their own
(the other queries' columns null), the queries are unioned and the union is collected
once, so one plan is made and its stages run side by side.

Guarantees: every name asked for is in the result, with its rows as ``Row`` objects of
the query's own columns and types (no text round trip), in the query's own order where
it has one at its top (a ``orderBy(...).limit(n)``: Spark plans it as a top-N whose
output is one ordered partition; the union keeps each child's partitions in order).
Not guaranteed: the order of a query that sorts without a limit (sort on the driver).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F


def collect(queries: Mapping[str, DataFrame]) -> dict[str, list[Row]]:
    """Every query's rows by name, from one collect of their union."""
    if not queries:
        return {}
    names = list(queries)
    columns = {name: f"q{i}" for i, name in enumerate(names)}
    tagged = [queries[name].select(F.struct(*queries[name].columns).alias(columns[name])) for name in names]
    union = reduce(lambda left, right: left.unionByName(right, allowMissingColumns=True), tagged)
    found: dict[str, list[Row]] = {name: [] for name in names}
    for row in union.collect():
        for name in names:
            value = row[columns[name]]
            if value is not None:
                found[name].append(value)
                break
    return found
