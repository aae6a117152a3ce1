"""Clock bounds come only from pairs ordered whatever the clocks say; each history here
holds a pair that looks ordered but is not, on two processes sharing one clock, followed by
a clean handover or a real overlap. Paired anyway, it proves a skew the shared clock does
not have, and the correction turns the clean handover into an overlap or hides the real one.

``kv-*`` (Cassandra): a and b share a counter; a's write of version 6 landed at 1.02 but was
stamped at 1.16, after b's version 7 (1.10): a KV write bounds its pair from its ``sent``
(when its request went out), never from a ``ts`` stamped once the write was confirmed. Then
b leads and hands over to a 30 ms after resigning (clean), or keeps leading in its own view
until 3.5 while a acquires at 3.03 (overlap). ``*-no-sent``: the writes carry no ``sent``.

``observed-*`` (Kubernetes): c observes a's record at epoch 5 at 1.00 (a's write never led:
no ``acquired``); the record is deleted, b writes epoch 5 at 1.50 and leads (elector.py:
two candidates may write one epoch, only the one that raised the mark leads). An
``observed`` bounds an acquisition only when it names the acquirer. b then resigns at 2.9
(clean) or its own view lasts until 3.5 (overlap) while c acquires epoch 6 at 3.0."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from .combined import Parted, module_fixture, part
from .histories import Log

TOLERANCE = 0.1


def _write(log: Log, t: float, version: int, sent: float | None) -> None:
    fields: dict[str, Any] = {"key": "k", "version": version, "store_incarnation": "i1"}
    if sent is not None:
        fields["sent"] = sent
    log.add(t, "kv", "counters", "updated", **fields)


def _kv(a: Log, b: Log, *, sent: bool, overlap: bool) -> None:
    def began(t: float) -> float | None:
        return t if sent else None

    _write(b, 1.00, 5, began(0.99))
    _write(b, 1.10, 7, began(1.05))  # b read a's version 6 (landed at 1.02) and wrote over it
    _write(a, 1.16, 6, began(1.015))  # a paused between its write and its stamp
    b.add(2.0, "leader_election", "job", "acquired", member="b", epoch=1, valid_until=3.5, sent=1.99)
    if overlap:
        b.leader(4.0, "job", "lost", "b", 1, valid_until=3.5)  # b froze: its own view lasted until 3.5
    else:
        b.leader(3.0, "job", "resigned", "b", 1, valid_until=3.0)
    a.add(3.03, "leader_election", "job", "acquired", member="a", epoch=2, valid_until=5.0, sent=3.02)
    a.leader(4.5, "job", "resigned", "a", 2, valid_until=4.5)


def _observed(b: Log, c: Log, *, overlap: bool) -> None:
    c.add(1.00, "leader_election", "job", "observed", member="a", epoch=5)
    b.add(1.52, "leader_election", "job", "acquired", member="b", epoch=5, valid_until=3.5, sent=1.50)
    c.add(1.53, "leader_election", "job", "observed", member="b", epoch=5)
    if overlap:
        b.leader(4.0, "job", "lost", "b", 5, valid_until=3.5)
    else:
        b.leader(2.9, "job", "resigned", "b", 5, valid_until=2.9)
    c.add(3.0, "leader_election", "job", "acquired", member="c", epoch=6, valid_until=5.0, sent=2.99)
    b.add(4.01 if overlap else 3.01, "leader_election", "job", "observed", member="c", epoch=6)
    c.leader(4.5, "job", "resigned", "c", 6, valid_until=4.5)


SCENARIOS: dict[str, tuple[str, Callable[[Log, Log], None], list[str]]] = {
    # namespace: (backend, history, the violations it holds)
    "kv-clean-no-sent": ("cassandra", partial(_kv, sent=False, overlap=False), []),
    "kv-clean-sent": ("cassandra", partial(_kv, sent=True, overlap=False), []),
    "kv-overlap-no-sent": ("cassandra", partial(_kv, sent=False, overlap=True), ["overlapping_leadership"]),
    "kv-overlap-sent": ("cassandra", partial(_kv, sent=True, overlap=True), ["overlapping_leadership"]),
    "observed-clean": ("kubernetes", partial(_observed, overlap=False), []),
    "observed-overlap": ("kubernetes", partial(_observed, overlap=True), ["overlapping_leadership"]),
}


def _history(root: Path) -> list[Log]:
    pairs = {
        namespace: [Log(root / f"{p}-{namespace}.jsonl", f"{p}-{namespace}", namespace=namespace, backend=backend)
                    for p in ("x", "y")]
        for namespace, (backend, _, _) in SCENARIOS.items()
    }
    for namespace, (_, history, _) in SCENARIOS.items():
        history(*pairs[namespace])
    return [log for logs in pairs.values() for log in logs]


PART = part("clock-causal-pairs", skew=TOLERANCE, build=_history)

analysis = module_fixture(PART)


@pytest.mark.parametrize("namespace", sorted(SCENARIOS))
def test_only_causal_pairs_bound_the_clocks(analysis: Parted, namespace: str) -> None:
    found = analysis.table("violations").filter(f"namespace = '{namespace}'").select("type").collect()
    assert [row["type"] for row in found] == SCENARIOS[namespace][2], analysis.summary["clocks"]
