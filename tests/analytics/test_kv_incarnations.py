"""A key's writes are split into incarnations by its deletes and creates, and within one by
version: the delete that ends an incarnation names the version it removed, the create after
it starts the next, and an update belongs to the incarnation it can have taken effect in —
after that incarnation's create could have, before its closing delete could have, at a
version that delete had not passed. Where calls overlap so that an update could lie in
either of two incarnations, it lies in the one that holds no other write of its version.
One shared clock, no skew tolerance; every key but "lost" has a linearization (the
robustness tier's Porcupine judged such histories), so only "lost" is a violation."""

from __future__ import annotations

from pathlib import Path

from .combined import Parted, module_fixture, part
from .histories import Log

WRITES = [
    # (process, answered, event, key, version, sent)
    # Key "three-at-once" (the tier's etcd history): a creates it; then b's delete of
    # version 2, a's update to version 2 and c's re-creating put all overlap. The update
    # took effect first (the delete removed its version 2), then the delete, then the
    # put; a's next update, to version 2 again, is of the new incarnation.
    ("a", 1.083, "put", "three-at-once", 1, 1.067),
    ("b", 1.224, "deleted", "three-at-once", 2, 1.215),
    ("a", 1.226, "updated", "three-at-once", 2, 1.216),
    ("c", 1.228, "put", "three-at-once", 1, 1.221),
    ("a", 1.263, "updated", "three-at-once", 2, 1.254),
    ("a", 1.340, "updated", "three-at-once", 3, 1.332),
    # Key "put-before-delete" (the tier's whole-cluster history): a's update to version 2
    # is answered at 2.173, after c's re-creating put was sent (2.169) but before b's
    # delete of version 2 was sent (2.180): the put could only follow the delete, so the
    # update is of the old incarnation; a's update at 2.30 is the new one's version 2.
    ("c", 2.010, "put", "put-before-delete", 1, 2.000),
    ("a", 2.173, "updated", "put-before-delete", 2, 2.085),
    ("b", 2.210, "deleted", "put-before-delete", 2, 2.180),
    ("c", 2.293, "put", "put-before-delete", 1, 2.169),
    ("a", 2.310, "updated", "put-before-delete", 2, 2.300),
    # Key "slow-answer": a's update to version 3 is sent at 4.02 and answered only at 4.30,
    # after b deleted version 3 and c created the key again: it took effect before the
    # delete; the new incarnation's versions 2 and 3 are c's.
    ("c", 4.010, "put", "slow-answer", 1, 4.000),
    ("c", 4.015, "updated", "slow-answer", 2, 4.011),
    ("a", 4.300, "updated", "slow-answer", 3, 4.020),
    ("b", 4.120, "deleted", "slow-answer", 3, 4.100),
    ("c", 4.170, "put", "slow-answer", 1, 4.150),
    ("c", 4.220, "updated", "slow-answer", 2, 4.200),
    ("c", 4.260, "updated", "slow-answer", 3, 4.240),
    # Key "lost": two updates both acknowledged version 2 of one incarnation.
    ("a", 5.010, "put", "lost", 1, 5.000),
    ("a", 5.030, "updated", "lost", 2, 5.020),
    ("b", 5.031, "updated", "lost", 2, 5.021),
]


def _history(root: Path) -> list[Log]:
    logs = {p: Log(root / f"{p}.jsonl", f"kv-incarnations-{p}", namespace="kv-incarnations", backend="memory")
            for p in "abc"}
    for process, answered, event, key, version, sent in WRITES:
        logs[process].add(answered, "kv", "store", event, key=key, version=version, sent=sent)
    return list(logs.values())


PART = part("kv-incarnations", skew=0.0, build=_history)

analysis = module_fixture(PART)


def test_an_update_lies_in_the_incarnation_its_version_and_the_closing_delete_allow(analysis: Parted) -> None:
    rows = analysis.table("violations").collect()
    assert sorted((row["type"], row["subject"]) for row in rows) == [("lost_update", "lost")], rows
