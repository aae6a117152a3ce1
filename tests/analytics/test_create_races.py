"""A put that creates a key again is a create race only when no delete can lie between it
and the key's earlier creation: a delete whose call began before the put returned may have
taken effect first, though its answer came later, and one answered before the earlier
creation was answered may have taken effect after it, when its answer came after that
creation began (calls that overlap, as a linearizability checker such as Porcupine orders
them). Likewise an update answered after a re-creating put began may have followed it: it
is of the put's incarnation. One shared clock, no skew tolerance."""

from __future__ import annotations

from pathlib import Path

from .combined import Parted, module_fixture, part
from .histories import Log


def _history(root: Path) -> list[Log]:
    a, b, c = (Log(root / f"{p}.jsonl", f"create-races-{p}", namespace="create-races", backend="memory")
               for p in "abc")
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
    # Key "slow-create": b's delete is sent at 3.10 and answered at 3.20, inside a's create
    # (sent 3.00, answered 3.30): the create may have come first and the delete removed it,
    # so b's create at 3.50 is no race (the robustness tier's Kubernetes and emulator
    # histories, which Porcupine judged linearizable).
    a.add(3.30, "kv", "store", "put", key="slow-create", version=1, sent=3.00)
    b.add(3.20, "kv", "store", "deleted", key="slow-create", version=1, sent=3.10)
    b.add(3.60, "kv", "store", "put", key="slow-create", version=1, sent=3.50)
    # Key "early-delete": the same, but c's delete is answered at 2.95, before that create was
    # sent: no delete can lie between the creates, a race.
    c.add(2.95, "kv", "store", "deleted", key="early-delete", version=1, sent=2.90)
    a.add(3.31, "kv", "store", "put", key="early-delete", version=1, sent=3.00)
    c.add(3.61, "kv", "store", "put", key="early-delete", version=1, sent=3.50)
    # Key "recreated": versions 1-3, deleted; c creates it again, sent at 4.10, answered at
    # 4.20; a's update answered version 2 at 4.15, inside that put's call: it followed the
    # put (the robustness tier's ZooKeeper history), no lost update, no version going back.
    a.add(4.01, "kv", "store", "put", key="recreated", version=1, sent=4.00)
    a.add(4.03, "kv", "store", "updated", key="recreated", version=2, sent=4.02)
    a.add(4.05, "kv", "store", "updated", key="recreated", version=3, sent=4.04)
    b.add(4.07, "kv", "store", "deleted", key="recreated", version=3, sent=4.06)
    a.add(4.15, "kv", "store", "updated", key="recreated", version=2, sent=4.12)
    c.add(4.20, "kv", "store", "put", key="recreated", version=1, sent=4.10)
    return [a, b, c]


PART = part("create-races", skew=0.0, build=_history)

analysis = module_fixture(PART)


def test_a_delete_that_overlaps_either_put_may_lie_between_and_one_outside_both_cannot(analysis: Parted) -> None:
    rows = analysis.table("violations").collect()
    assert sorted((row["type"], row["subject"]) for row in rows) == [
        ("create_race", "early-delete"), ("create_race", "race")], rows
