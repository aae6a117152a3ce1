"""The membership pass (analytics.membership, issue 23): windows over the joins, leaves and
expiries alone, joined back to every event, give exactly what the four window orders over
every group event gave — on hostile input: times tied, seqs missing, several processes
joining as one member, departures logged twice, observers' joins, events out of order."""

from __future__ import annotations

import random
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)


def _events(spark: Any, seed: int) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rng = random.Random(seed)
    schema = T.StructType([
        T.StructField(name, kind) for name, kind in [
            ("namespace", T.StringType()), ("name", T.StringType()), ("primitive", T.StringType()),
            ("event", T.StringType()), ("source", T.StringType()), ("process", T.StringType()),
            ("member", T.StringType()), ("tu", T.LongType()), ("seq", T.LongType()), ("file", T.StringType()),
            ("line", T.LongType()), ("block", T.LongType()), ("rid", T.LongType()), ("epoch", T.LongType()),
            ("key", T.StringType()), ("version", T.LongType()),
        ]
    ])
    rows = []
    for line in range(2500):
        event = rng.choice(["joined", "joined", "renewed", "renewed", "renewed", "renewed", "left", "expired"])
        rows.append((
            "ns", f"g{rng.randrange(2)}", "group", event, rng.choice(["client", "client", "client", "operator"]),
            f"p{rng.randrange(3)}", f"m{rng.randrange(3)}", rng.randrange(400) * 500_000,
            None if rng.random() < 0.3 else rng.randrange(60), f"f{rng.randrange(2)}.jsonl", line + 1,
            0, line, None, None, None,
        ))
    frame = spark.createDataFrame(rows, schema)
    return frame.select(
        "*", (F.col("tu") / 1e6).alias("t"), F.timestamp_micros("tu").alias("ts"),
        F.lit(None).cast("timestamp").alias("valid_until_ts"),
    ).repartition(4, "namespace", "name")


def _four_orders(group_events: Any) -> Any:
    """The pass as it was: every window over every group event."""
    from pyspark.sql import functions as F

    from kubecoord.analytics.membership import MEMBER, _window

    before, after = _window(*MEMBER, ascending=True), _window(*MEMBER, ascending=False)
    own_before, own_after = _window(*MEMBER, "process", ascending=True), _window(*MEMBER, "process", ascending=False)
    event, t = F.col("event"), F.col("t")
    is_join, is_end = event == "joined", event.isin("left", "expired")
    return group_events.select(
        "*",
        F.last(F.when(is_join, F.struct("t", "ts", "rid")), True).over(before).alias("last_join"),
        F.last(F.when(is_end, t), True).over(before).alias("last_end_t"),
        F.last(F.when(event == "expired", t), True).over(before).alias("last_expired_t"),
        F.last(F.when(event.isin("joined", "renewed"), t), True).over(before).alias("last_hb_t"),
        F.last(F.when(is_end, F.struct("t", "event")), True).over(after).alias("next_end"),
        F.last(F.when(event == "expired", F.struct("t", "event")), True).over(after).alias("next_expired"),
        F.last(F.when(is_join, t), True).over(own_before).alias("own_join_t"),
        F.last(F.when(event == "left", t), True).over(own_before).alias("own_left_t"),
        F.last(F.when(event == "left", F.struct("t", "event")), True).over(own_after).alias("own_next_left"),
    )


def _results(events: Any) -> dict[str, list[Any]]:
    from kubecoord.analytics import membership
    from kubecoord.analytics.frames import release

    found = membership.analyze(events, 1.0)
    try:
        return {name: sorted(map(tuple, getattr(found, name).collect()), key=repr)
                for name in ("timeline", "duplicates", "churn", "expiries")}
    finally:
        release(found.persisted)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_pass_over_changes_equals_four_orders_over_every_event(
    spark: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubecoord.analytics import membership

    events = _events(spark, seed)
    new = _results(events)
    monkeypatch.setattr(membership, "_passes", _four_orders)
    old = _results(events)
    assert all(old[name] for name in old), {name: len(rows) for name, rows in old.items()}
    assert new == old
