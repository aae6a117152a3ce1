"""On a session backend (etcd here) a candidate leads once the older candidates' keys are
gone: another process's watch may show it leading before its own ``acquired`` is stamped
(tens of milliseconds in the soak). Such an ``acquired`` without ``sent`` is no lower bound
of the acquisition; read as one, it made a clean handover between two processes on one
clock an overlap larger than the uncertainty the false bounds left.

The histories: b leads epoch 2, c epoch 3, b epoch 4, every process on one clock, each
``observed`` of a new epoch stamped before the new leader's ``acquired`` (by 35 ms, and
40 ms the other way). In ``*-no-sent`` the log is written as etcd's election logged it
before its ``acquired`` carried ``sent``; in ``*-sent`` it carries ``sent``, when the
candidate's key was put."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .combined import Parted, module_fixture, part
from .histories import Log

TOLERANCE = 0.1

SCENARIOS: dict[str, bool] = {
    # namespace: a real overlap
    "clean-no-sent": False,
    "clean-sent": False,
    "overlap-no-sent": True,
    "overlap-sent": True,
}


def _acquire(log: Log, t: float, member: str, epoch: int, *, key_put: float | None) -> None:
    fields: dict[str, Any] = {"member": member, "epoch": epoch, "valid_until": t + 4.0}
    if key_put is not None:
        fields["sent"] = key_put
    log.add(t, "leader_election", "job", "acquired", **fields)


def _handovers(b: Log, c: Log, *, sent: bool, overlap: bool) -> None:
    def put(t: float) -> float | None:
        return t if sent else None

    _acquire(b, 1.035, "b", 2, key_put=put(0.5))
    c.leader(1.000, "job", "observed", "b", 2)  # c's watch showed b leading first
    b.leader(2.001, "job", "resigned", "b", 2, valid_until=2.000)
    _acquire(c, 2.005, "c", 3, key_put=put(1.2))
    b.leader(2.045, "job", "observed", "c", 3)
    if overlap:
        # c froze; on waking it logs lost, its own view having lasted until 3.5.
        c.leader(4.0, "job", "lost", "c", 3, valid_until=3.5)
    else:
        c.leader(3.001, "job", "resigned", "c", 3, valid_until=3.000)
    _acquire(b, 3.010, "b", 4, key_put=put(2.1))
    c.leader(3.004 if not overlap else 4.01, "job", "observed", "b", 4)


def _history(root: Path) -> list[Log]:
    logs: list[Log] = []
    for namespace, overlap in SCENARIOS.items():
        b = Log(root / f"b-{namespace}.jsonl", f"b-{namespace}", namespace=namespace, backend="etcd",
                monotonic=100.0)
        c = Log(root / f"c-{namespace}.jsonl", f"c-{namespace}", namespace=namespace, backend="etcd",
                monotonic=100.0)
        _handovers(b, c, sent=namespace.endswith("-sent") and not namespace.endswith("no-sent"), overlap=overlap)
        logs += [b, c]
    return logs


PART = part("clock-session-acquisitions", skew=TOLERANCE, build=_history)

analysis = module_fixture(PART)


@pytest.mark.parametrize("namespace", sorted(SCENARIOS))
def test_a_clean_handover_is_no_overlap_and_a_real_one_is_found(analysis: Parted, namespace: str) -> None:
    rows = analysis.table("violations").filter(f"namespace = '{namespace}'").collect()
    expected = ["overlapping_leadership"] if SCENARIOS[namespace] else []
    assert [row["type"] for row in rows] == expected, analysis.summary["clocks"]
