"""Overlaps judged against what the clocks leave uncertain, with and without ``mono``.

Independent elections in one log (one analysis, tolerance 1 s), each with its own
processes and namespace. In every election a leads epoch 1 from 0, renewing every 10 s
(valid_until 15 s ahead); b takes over at about TAKEOVER; b resigns at 110. Times given
to Log are true times; a Log with clock_offset stamps them off by that much.

Evidence bounds a pair's offset only where it does not presuppose a correct handover:
``observed`` events of the other's record, starting at the acquisition's ``sent``, and KV
version order. A resignation stamped after the successor's acquisition is no evidence:
it is also what a split brain that ends in a resignation looks like.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubecoord.analytics.pipeline import Analysis, analyze

from .histories import Log

TAKEOVER = 100.0
LATENCY = 0.01
"""A request's or a watch's time in transit."""


def _election(
    root: Path, namespace: str, *, overlap: float, offset: float = 0.0, mono: bool = False,
    one_process: bool = False, seen: bool = False, step: float = 0.0,
) -> list[Log]:
    """``overlap`` < 0: a resigns at TAKEOVER and b acquires ``-overlap`` later (a clean
    resign handover); else b acquires at TAKEOVER while a still leads until TAKEOVER +
    overlap, then logs ``lost``.
    ``offset``: b's clock error; ``seen``: each side's observer logs the other's
    acquisition LATENCY after its write went out, and each ``acquired`` carries ``sent``
    (as kubecoord's clients log them), which bounds the offset to within LATENCY;
    ``step``: b's wall clock is stepped by this much at 50 s (its ``mono`` is not)."""
    first = Log(root / f"{namespace}-1.jsonl", f"{namespace}-1", namespace=namespace,
                monotonic=1000.0 if mono else None)
    second = first if one_process else Log(root / f"{namespace}-2.jsonl", f"{namespace}-2", namespace=namespace,
                                           clock_offset=offset, monotonic=5000.0 if mono else None)
    confirmed = 4 * LATENCY  # the record's and the epoch mark's answers

    def acquire(log: Log, t: float, member: str, epoch: int) -> None:
        if seen:
            log.add(t, "leader_election", "svc", "acquired", member=member, epoch=epoch, valid_until=t + 15,
                    sent=t - confirmed)
        else:
            log.leader(t, "svc", "acquired", member, epoch, valid_until=t + 15)

    acquire(first, 0, "a", 1)
    if seen:
        second.add(LATENCY - confirmed, "leader_election", "svc", "observed", member="a", epoch=1)
    for t in range(10, 100, 10):
        if t == 50:
            second.clock_offset += step
        first.leader(t, "svc", "renewed", "a", 1, valid_until=t + 15)
    start = TAKEOVER - min(overlap, 0.0)
    if overlap < 0:
        first.leader(TAKEOVER, "svc", "resigned", "a", 1)
        acquire(second, start, "b", 2)
    else:
        acquire(second, start, "b", 2)
        first.leader(TAKEOVER + overlap / 2, "svc", "renewed", "a", 1, valid_until=TAKEOVER + 15)
        first.leader(TAKEOVER + overlap, "svc", "lost", "a", 1)
    if seen:
        first.add(start + LATENCY - confirmed, "leader_election", "svc", "observed", member="b", epoch=2)
    second.leader(110, "svc", "resigned", "b", 2)
    return [first] if one_process else [first, second]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("clock-verdicts")


@pytest.fixture(scope="module")
def judged(spark: Any, root: Path) -> Iterator[Analysis]:
    logs: list[Log] = []

    def election(namespace: str, **options: Any) -> None:
        logs.extend(_election(root, namespace, **options))

    # A clean resign handover to a successor whose clock runs 2 s behind, with nothing but
    # the two acquisitions' order between the processes: its stamps are those of a split
    # brain that ends in a resignation (b took over at 98.05 on a true clock; a resigned
    # 1.95 s later). The tolerance decides both alike.
    election("behind", overlap=-0.05, offset=-2.0)
    election("behind-mono", overlap=-0.05, offset=-2.0, mono=True)
    # Its twin: b (a true clock) took over at 98.05 while a led on until it resigned at 100.
    twin, successor = (Log(root / f"resigned-late-{i}.jsonl", f"resigned-late-{i}", namespace="resigned-late")
                       for i in (1, 2))
    twin.leader(0, "svc", "acquired", "a", 1, valid_until=15)
    for t in range(10, 100, 10):
        twin.leader(t, "svc", "renewed", "a", 1, valid_until=t + 15)
    twin.leader(TAKEOVER, "svc", "resigned", "a", 1)
    successor.leader(98.05, "svc", "acquired", "b", 2, valid_until=113.05)
    successor.leader(108, "svc", "resigned", "b", 2)
    logs.extend([twin, successor])
    # The same handovers as kubecoord's clients log them (observers, ``sent``): decided.
    election("behind-seen", overlap=-0.05, offset=-2.0, seen=True)
    election("behind-seen-mono", overlap=-0.05, offset=-2.0, seen=True, mono=True)
    election("ahead-seen", overlap=-0.05, offset=2.0, seen=True)
    # A 0.9 s split brain within one process: nothing uncertain between its times.
    election("oneclock", overlap=0.9, one_process=True)
    election("oneclock-mono", overlap=0.9, one_process=True, mono=True)
    # A 0.9 s split brain between two processes on one clock with no evidence between
    # them: within the 1 s tolerance, so undecided, listed, not a violation.
    election("sameclock", overlap=0.9)
    election("sameclock-mono", overlap=0.9, mono=True)
    # A 0.9 s split brain between clocks 1.5 s apart, known to within LATENCY.
    election("split-behind", overlap=0.9, offset=-1.5, seen=True)
    election("split-ahead-mono", overlap=0.9, offset=1.5, seen=True, mono=True)
    # ... and one whose successor's wall clock was stepped back 1.2 s during the log
    # (its monotonic clock was not).
    election("split-stepped-mono", overlap=0.9, offset=0.3, seen=True, mono=True, step=-1.2)
    # Just above and below the uncertainty: the tolerance, or what the evidence leaves.
    election("above-tolerance", overlap=1.1)
    election("above-evidence", overlap=0.05, seen=True)
    election("below-evidence", overlap=0.005, seen=True)
    for each in logs:
        each.write()
    result = analyze(spark, [str(root / "*.jsonl")], skew=1.0)
    yield result
    result.close()


def _overlaps(analysis: Analysis) -> dict[str, str]:
    rows = analysis.tables["violations"].filter("type = 'overlapping_leadership'").collect()
    return {row["namespace"]: row["detail"] for row in rows}


def _undecided(analysis: Analysis) -> dict[str, tuple[float, float]]:
    lead = analysis.summary["leadership"]
    examples = {e["namespace"]: (e["overlap_seconds"], e["uncertainty_seconds"])
                for e in lead["undecided_overlap_examples"]}
    assert lead["undecided_overlaps"] == len(examples)
    return examples


def test_overlaps_beyond_what_the_clocks_leave_uncertain_are_violations(judged: Analysis) -> None:
    found = _overlaps(judged)
    assert sorted(found) == [
        "above-evidence", "above-tolerance", "behind", "behind-mono", "oneclock", "oneclock-mono",
        "resigned-late", "split-ahead-mono", "split-behind", "split-stepped-mono",
    ]
    for namespace in ("oneclock", "oneclock-mono"):
        assert found[namespace].endswith("0.900 s of overlap (clock uncertainty 0.000 s)"), namespace
    for namespace in ("split-behind", "split-ahead-mono", "split-stepped-mono"):
        assert found[namespace].endswith("0.900 s of overlap (clock uncertainty 0.010 s)"), found[namespace]
    assert found["above-tolerance"].endswith("1.100 s of overlap (clock uncertainty 1.000 s)")
    assert found["above-evidence"].endswith("0.050 s of overlap (clock uncertainty 0.010 s)")


def test_a_resign_handover_stamped_before_the_resignation_reads_as_the_split_brain_it_may_be(
    judged: Analysis, root: Path,
) -> None:
    """Without evidence between the two processes, the handover to a clock 2 s behind and a
    1.95 s split brain that ends in a resignation are the same log (names aside): one
    verdict for both, the tolerance's."""

    def shape(namespace: str) -> list[list[dict[str, Any]]]:
        logs = [[json.loads(line) for line in path.read_text().splitlines()]
                for path in sorted(root.glob(f"{namespace}-[12].jsonl"))]
        return [[{k: v for k, v in e.items() if k not in ("process", "namespace")} for e in log] for log in logs]

    assert shape("behind") == shape("resigned-late")
    found = _overlaps(judged)
    assert found["behind"] == found["resigned-late"] == (
        "b (epoch 2) took over while a (epoch 1) still led: 1.950 s of overlap (clock uncertainty 1.000 s)")


def test_handovers_logged_with_observers_and_sent_are_decided_clean_with_or_without_mono(judged: Analysis) -> None:
    undecided = _undecided(judged)
    for namespace in ("behind-seen", "behind-seen-mono", "ahead-seen"):
        assert namespace not in _overlaps(judged) and namespace not in undecided, namespace
    offsets = judged.summary["clocks"]["process_offsets_seconds"]
    for namespace, offset in (("behind-seen", -2.0), ("behind-seen-mono", -2.0), ("ahead-seen", 2.0)):
        assert offsets[f"{namespace}-2"] - offsets[f"{namespace}-1"] == pytest.approx(offset, abs=LATENCY)


def test_an_overlap_within_the_uncertainty_is_undecided_not_hidden(judged: Analysis) -> None:
    undecided = _undecided(judged)
    assert sorted(undecided) == ["below-evidence", "sameclock", "sameclock-mono"]
    assert undecided["sameclock"] == undecided["sameclock-mono"]
    assert undecided["sameclock"] == pytest.approx((0.9, 1.0))
    assert undecided["below-evidence"] == pytest.approx((0.005, LATENCY))


def test_the_clock_evidence_states_skews_not_timestamps(judged: Analysis) -> None:
    clocks = judged.summary["clocks"]
    bounds = {(b["a"], b["b"]): b for b in clocks["largest_skews"]}
    # b's acquisition 98.05 s after a's on b's clock is the only order the two share: it
    # says nothing about their clocks, and no bound is stated for them.
    assert ("behind-1", "behind-2") not in bounds and ("sameclock-1", "sameclock-2") not in bounds
    split = bounds[("split-behind-1", "split-behind-2")]
    assert (split["low"], split["high"]) == pytest.approx((-1.5 - LATENCY, -1.5 + LATENCY))
    for bound in clocks["largest_skews"]:
        for side in ("low", "high"):
            assert bound[side] is None or abs(bound[side]) <= 2.0 + LATENCY, bound
