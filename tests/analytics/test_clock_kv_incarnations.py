"""KV versions bound clock offsets only where the log names one predecessor: a key deleted
and re-created writes each version once per incarnation of the key, and the nearest write
of version v to a write of version v + 1 may be another incarnation's, even one begun
after it. Paired anyway, it proves a skew that one shared clock does not have, and the
corrected times turn a clean history into violations."""

from __future__ import annotations

from pathlib import Path

from .combined import Parted, module_fixture, part
from .histories import Log

NAMESPACE = "clock-kv-incarnations"


def _history(root: Path) -> list[Log]:
    a = Log(root / "a.jsonl", "clock-kv-a", namespace=NAMESPACE, backend="memory")
    b = Log(root / "b.jsonl", "clock-kv-b", namespace=NAMESPACE, backend="memory")
    # One clock. b creates k; a's update to version 2 returns late (1.30); a deletes k;
    # b creates k again, its put begun 0.03 s after a's update returned: of the two writes
    # of version 1 it is the nearer one to a's version 2, but it came after it.
    b.add(1.01, "kv", "store", "put", key="k", version=1, sent=1.00)
    a.add(1.30, "kv", "store", "updated", key="k", version=2, sent=1.02)
    a.add(1.32, "kv", "store", "deleted", key="k", version=2, sent=1.31)
    b.add(1.34, "kv", "store", "put", key="k", version=1, sent=1.33)
    return [a, b]


PART = part("clock-kv-incarnations", skew=0.0, build=_history)

analysis = module_fixture(PART)


def test_another_incarnations_version_proves_no_skew(analysis: Parted) -> None:
    """No pair of these events bounds a clock: every process named by a pair gets an
    offset, so neither of the two has one (and no process has one when this part is
    analysed alone, as pairs_with_evidence 0 says)."""
    clocks = analysis.summary["clocks"]
    assert not set(analysis.processes) & set(clocks["process_offsets_seconds"]), clocks
    assert not clocks["inconsistent_evidence"], clocks


def test_the_recreated_key_is_no_create_race(analysis: Parted) -> None:
    rows = analysis.table("violations").collect()
    assert [(row["type"], row["subject"]) for row in rows] == [], analysis.summary["clocks"]
