"""Clock bounds read from an acquisition's ``sent`` still find real overlaps and still
clear clean handovers: on one clock and across two clocks of a known skew, with and
without ``mono``, and with a wall clock stepped during the log.

Every history here is written as the lease core logs it: ``acquired`` stamped once the
record write and the epoch mark were confirmed, with ``sent`` (when the write went out);
the other process's ``observed`` of the new epoch may come before that stamp."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .combined import Parted, module_fixture, part
from .histories import Log

TOLERANCE = 0.1
"""Below the 0.3 s skew of the two-clock histories: only the evidence can explain it."""
SKEW = -0.3
"""b's clock runs this far behind a's (its stamps read true time + SKEW)."""


def _acquire(log: Log, sent: float, confirmed: float, member: str, epoch: int, valid_until: float) -> None:
    log.add(confirmed, "leader_election", "job", "acquired", member=member, epoch=epoch, valid_until=valid_until,
            sent=sent)


def _observe(log: Log, t: float, member: str, epoch: int) -> None:
    log.add(t, "leader_election", "job", "observed", member=member, epoch=epoch)


def _one_clock_renewing(a: Log, b: Log) -> None:
    """a keeps renewing (its own view lasts until 3.5) while b acquired epoch 2 at 2.0:
    1.5 s of real overlap on one clock; a saw b's record 50 ms before b stamped acquired."""
    _acquire(a, 0.0, 0.05, "a", 1, 1.5)
    _observe(b, 0.02, "a", 1)
    a.leader(1.0, "job", "renewed", "a", 1, valid_until=2.5)
    _acquire(b, 1.9, 2.0, "b", 2, 3.5)
    _observe(a, 1.95, "b", 2)
    a.leader(2.0, "job", "renewed", "a", 1, valid_until=3.5)
    a.leader(3.5, "job", "lost", "a", 1)
    b.leader(4.0, "job", "resigned", "b", 2)


def _two_clocks(a: Log, b: Log, *, overlap: bool) -> None:
    """b handed to a at 1.0 (both directions observed: the skew is bracketed to 0.04 s);
    then a either resigns at 2.0 and b takes over 50 ms later (clean), or a's own view
    lasts until 2.25 (frozen, no resignation) while b acquires at 2.05 (0.2 s of overlap,
    which a 0.3 s skew would hide from the stamps alone)."""
    _acquire(b, 0.0, 0.05, "b", 1, 1.5)
    _observe(a, 0.02, "b", 1)
    b.leader(0.98, "job", "resigned", "b", 1)
    _acquire(a, 1.0, 1.05, "a", 2, 1.75)
    _observe(b, 1.02, "a", 2)
    a.leader(1.5, "job", "renewed", "a", 2, valid_until=2.25)
    if overlap:
        a.leader(4.0, "job", "lost", "a", 2)  # noticed on waking
    else:
        a.leader(2.0, "job", "resigned", "a", 2)
    _acquire(b, 2.01, 2.05, "b", 3, 3.5)
    _observe(a, 2.03 if not overlap else 4.1, "b", 3)
    b.leader(3.0, "job", "resigned", "b", 3)


SCENARIOS: dict[str, tuple[bool, bool]] = {
    # namespace: (real overlap, mono)
    "one-clock": (True, False),
    "one-clock-mono": (True, True),
    "skew-clean": (False, False),
    "skew-clean-mono": (False, True),
    "skew-overlap": (True, False),
    "skew-overlap-mono": (True, True),
    "stepped-clean-mono": (False, True),
    "stepped-overlap-mono": (True, True),
}


def _history(root: Path) -> list[Log]:
    logs: list[Log] = []
    for namespace, (overlap, mono) in SCENARIOS.items():
        skewed = not namespace.startswith("one-clock")
        a = Log(root / f"a-{namespace}.jsonl", f"a-{namespace}", namespace=namespace,
                monotonic=100.0 if mono else None)
        b = Log(root / f"b-{namespace}.jsonl", f"b-{namespace}", namespace=namespace,
                clock_offset=SKEW if skewed else 0.0, monotonic=5_000.0 if mono else None)
        logs += [a, b]
        if not skewed:
            _one_clock_renewing(a, b)
            continue
        if namespace.startswith("stepped"):
            # b's wall clock steps 2 s ahead (NTP) after its first term; its mono does not.
            original = b.add

            def stepping(t: float, *args: Any, _log: Log = b, _add: Any = original, **fields: Any) -> int:
                _log.clock_offset = SKEW + (2.0 if t >= 1.0 else 0.0)
                return int(_add(t, *args, **fields))

            b.add = stepping  # type: ignore[method-assign]
        _two_clocks(a, b, overlap=overlap)
    return logs


PART = part("clock-bounds-from-sent", skew=TOLERANCE, build=_history)

analysis = module_fixture(PART)


def _violations(analysis: Parted, namespace: str) -> list[tuple[str, str]]:
    rows = analysis.table("violations").filter(f"namespace = '{namespace}'").orderBy("ts").collect()
    return [(row["type"], row["primitive"]) for row in rows]


@pytest.mark.parametrize("namespace", sorted(SCENARIOS))
def test_overlaps_are_found_and_clean_handovers_are_not(analysis: Parted, namespace: str) -> None:
    overlap, _ = SCENARIOS[namespace]
    expected = [("overlapping_leadership", "leader_election")] if overlap else []
    assert _violations(analysis, namespace) == expected, analysis.summary["clocks"]
