"""A key's writes are split into incarnations by its deletes and creates, and within one by
version: the delete that ends an incarnation names the version it removed, the create after
it starts the next, and an update belongs to the incarnation it can have taken effect in —
after that incarnation's create could have, before its closing delete could have, at a
version that delete had not passed. Where calls overlap so that an update could lie in
either of two incarnations, it lies in the one that holds no other write of its version.
One shared clock, no skew tolerance; every key but "lost" has a linearization (the
robustness tier's Porcupine judged such histories), so only "lost" is a violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubecoord.analytics.pipeline import Analysis

from .histories import Log, analyzed


@pytest.fixture(scope="module")
def analysis(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Analysis]:
    root = tmp_path_factory.mktemp("kv-incarnations")
    a = Log(root / "a.jsonl", "a", backend="memory")
    b = Log(root / "b.jsonl", "b", backend="memory")
    c = Log(root / "c.jsonl", "c", backend="memory")
    # Key "three-at-once" (the tier's etcd history): a creates it; then b's delete of
    # version 2, a's update to version 2 and c's re-creating put all overlap. The update
    # took effect first (the delete removed its version 2), then the delete, then the
    # put; a's next update, to version 2 again, is of the new incarnation.
    a.add(1.083, "kv", "store", "put", key="three-at-once", version=1, sent=1.067)
    b.add(1.224, "kv", "store", "deleted", key="three-at-once", version=2, sent=1.215)
    a.add(1.226, "kv", "store", "updated", key="three-at-once", version=2, sent=1.216)
    c.add(1.228, "kv", "store", "put", key="three-at-once", version=1, sent=1.221)
    a.add(1.263, "kv", "store", "updated", key="three-at-once", version=2, sent=1.254)
    a.add(1.340, "kv", "store", "updated", key="three-at-once", version=3, sent=1.332)
    # Key "put-before-delete" (the tier's whole-cluster history): a's update to version 2
    # is answered at 2.173, after c's re-creating put was sent (2.169) but before b's
    # delete of version 2 was sent (2.180): the put could only follow the delete, so the
    # update is of the old incarnation; a's update at 2.30 is the new one's version 2.
    c.add(2.010, "kv", "store", "put", key="put-before-delete", version=1, sent=2.000)
    a.add(2.173, "kv", "store", "updated", key="put-before-delete", version=2, sent=2.085)
    b.add(2.210, "kv", "store", "deleted", key="put-before-delete", version=2, sent=2.180)
    c.add(2.293, "kv", "store", "put", key="put-before-delete", version=1, sent=2.169)
    a.add(2.310, "kv", "store", "updated", key="put-before-delete", version=2, sent=2.300)
    # Key "slow-answer": a's update to version 3 is sent at 4.02 and answered only at 4.30,
    # after b deleted version 3 and c created the key again: it took effect before the
    # delete; the new incarnation's versions 2 and 3 are c's.
    c.add(4.010, "kv", "store", "put", key="slow-answer", version=1, sent=4.000)
    c.add(4.015, "kv", "store", "updated", key="slow-answer", version=2, sent=4.011)
    a.add(4.300, "kv", "store", "updated", key="slow-answer", version=3, sent=4.020)
    b.add(4.120, "kv", "store", "deleted", key="slow-answer", version=3, sent=4.100)
    c.add(4.170, "kv", "store", "put", key="slow-answer", version=1, sent=4.150)
    c.add(4.220, "kv", "store", "updated", key="slow-answer", version=2, sent=4.200)
    c.add(4.260, "kv", "store", "updated", key="slow-answer", version=3, sent=4.240)
    # Key "lost": two updates both acknowledged version 2 of one incarnation.
    a.add(5.010, "kv", "store", "put", key="lost", version=1, sent=5.000)
    a.add(5.030, "kv", "store", "updated", key="lost", version=2, sent=5.020)
    b.add(5.031, "kv", "store", "updated", key="lost", version=2, sent=5.021)
    yield from analyzed(spark, root, (a, b, c), skew=0.0)


def test_an_update_lies_in_the_incarnation_its_version_and_the_closing_delete_allow(analysis: Analysis) -> None:
    rows = analysis.tables["violations"].collect()
    assert sorted((row["type"], row["subject"]) for row in rows) == [("lost_update", "lost")], rows
