"""A put that creates a key again is a create race only when no delete can lie between it
and the key's earlier creation: a delete whose call began before the put returned may have
taken effect first, though its answer came later (calls that overlap, as a linearizability
checker such as Porcupine orders them). One shared clock, no skew tolerance."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubecoord.analytics.pipeline import Analysis

from .histories import Log, analyzed


@pytest.fixture(scope="module")
def analysis(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Analysis]:
    root = tmp_path_factory.mktemp("create-races")
    a = Log(root / "a.jsonl", "a", backend="memory")
    b = Log(root / "b.jsonl", "b", backend="memory")
    # Key "overlap": a creates it; b's delete is sent at 1.10 and answered at 1.40; a creates
    # it again, sent at 1.20 and answered at 1.30, before the delete's answer: the delete
    # may have come first, so no race.
    a.add(1.01, "kv", "store", "put", key="overlap", version=1, sent=1.00)
    b.add(1.40, "kv", "store", "deleted", key="overlap", version=1, sent=1.10)
    a.add(1.30, "kv", "store", "put", key="overlap", version=1, sent=1.20)
    # Key "race": the same, but the delete is sent only after the second put was answered:
    # the second put created a key that existed.
    a.add(2.01, "kv", "store", "put", key="race", version=1, sent=2.00)
    a.add(2.30, "kv", "store", "put", key="race", version=1, sent=2.20)
    b.add(2.40, "kv", "store", "deleted", key="race", version=1, sent=2.35)
    yield from analyzed(spark, root, (a, b), skew=0.0)


def test_a_delete_that_overlaps_the_put_may_come_first_and_a_later_one_cannot(analysis: Analysis) -> None:
    rows = analysis.tables["violations"].collect()
    assert sorted((row["type"], row["subject"]) for row in rows) == [("create_race", "race")], rows
