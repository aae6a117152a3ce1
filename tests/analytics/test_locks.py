"""Locks in the event log: their events are valid input, a lock's token that goes back is
an epoch_not_increasing violation, and an overlap of two holds is found on the lock's
record (its election events, with valid_until), where a frozen holder's term ends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubecoord.analytics.pipeline import Analysis

from .histories import Log, analyzed

"""The module's analysis runs in its first test's set-up: ~40 s at load 5, past the
default 180 s at load 18 (a fresh-clone run beside two engineers' Spark jobs)."""


@pytest.fixture(scope="module")
def analysis(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Analysis]:
    root = tmp_path_factory.mktemp("locks")
    logs: list[Log] = []

    def log(process: str, namespace: str) -> Log:
        logs.append(Log(root / f"{process}-{namespace}.jsonl", process, namespace=namespace))
        return logs[-1]

    def hold(each: Log, start: float, end: float, member: str, token: int, how: str = "released") -> None:
        """A hold as kubecoord logs it: the record's term (acquired with valid_until, renewals)
        and the lock's own events with the token."""
        each.leader(start, "job", "acquired", member, token, valid_until=start + 1.5)
        each.add(start + 0.001, "lock", "job", "acquired", member=member, epoch=token)
        if end - start > 1:
            each.leader(start + 1, "job", "renewed", member, token, valid_until=end)
        if how == "released":
            each.add(end, "lock", "job", "released", member=member, epoch=token)
            each.leader(end, "job", "resigned", member, token)
        else:
            each.add(end + 5, "lock", "job", "lost", member=member, epoch=token)  # noticed on waking

    # Clean: a released to b; c takes over after b froze (its own view ended at 4.5).
    a, b, c = log("a", "clean"), log("b", "clean"), log("c", "clean")
    hold(a, 0, 2, "a", 1)
    hold(b, 2.1, 4.5, "b", 2, how="lost")
    hold(c, 7, 8, "c", 3)
    # A token going back: b acquired token 4 after a had 5 (a hand-edited record). The same
    # processes as above: the clean handover proves their clocks agree, so the estimator
    # cannot explain the regression away as skew.
    d, e = log("a", "backwards"), log("b", "backwards")
    hold(d, 10, 11, "a", 5)
    hold(e, 13, 14, "b", 4)
    # An overlap: g took the record at 2 while f's own view lasted until 3.
    f, g = log("f", "overlap"), log("g", "overlap")
    hold(f, 0, 3, "f", 1)
    hold(g, 2, 4, "g", 2)
    # Holds handed over on one machine (one clock), as the lease core logs them: each
    # ``acquired`` stamped once its record write and epoch mark were confirmed, with
    # ``sent``; the other process's lock observer logs ``observed`` as soon as the record
    # changes. q's first acquisition took 60 ms to confirm (its observer saw it at 10 ms);
    # p resigned at 1.0 and q took the lock again 11 ms later.
    p, q = log("p", "confirmed"), log("q", "confirmed")
    q.add(0.06, "leader_election", "handed", "acquired", member="q", epoch=1, valid_until=1.5, sent=0.0)
    p.add(0.01, "leader_election", "handed", "observed", member="q", epoch=1)
    q.leader(0.5, "handed", "resigned", "q", 1)
    p.add(0.52, "leader_election", "handed", "acquired", member="p", epoch=2, valid_until=2.0, sent=0.51)
    q.add(0.58, "leader_election", "handed", "observed", member="p", epoch=2)
    p.leader(1.0, "handed", "resigned", "p", 2)
    q.add(1.011, "leader_election", "handed", "acquired", member="q", epoch=3, valid_until=2.5, sent=1.001)
    q.leader(2.0, "handed", "resigned", "q", 3)
    yield from analyzed(spark, root, logs, skew=0.5)


def _violations(analysis: Analysis, namespace: str) -> list[tuple[str, str]]:
    rows = analysis.tables["violations"].filter(f"namespace = '{namespace}'").orderBy("ts").collect()
    return [(row["type"], row["primitive"]) for row in rows]


def test_lock_events_are_valid_input(analysis: Analysis) -> None:
    assert analysis.summary["inputs"]["malformed_lines"] == 0, analysis.summary["inputs"]


def test_a_clean_history_of_holds_has_no_violation(analysis: Analysis) -> None:
    assert _violations(analysis, "clean") == []


def test_a_token_going_back_is_found(analysis: Analysis) -> None:
    assert ("epoch_not_increasing", "lock") in _violations(analysis, "backwards")


def test_overlapping_holds_are_found_on_the_lock_record(analysis: Analysis) -> None:
    assert _violations(analysis, "overlap") == [("overlapping_leadership", "leader_election")]


def test_a_free_lock_between_holds_is_no_failover(analysis: Analysis) -> None:
    assert analysis.tables["failover_gaps"].filter("name = 'job'").count() == 0
    assert analysis.tables["leadership_intervals"].filter("name = 'job'").count() > 0


def test_observers_seeing_a_record_before_its_acquisition_is_stamped_prove_no_skew(analysis: Analysis) -> None:
    """Causal order starts at the acquisition's ``sent``: read from ``acquired``'s own stamp,
    q's first acquisition (seen 50 ms before it was stamped) made q's clock look 50-60 ms
    ahead of p's, and the clean 11 ms handover at 1.0 an overlap of 44 ms."""
    assert _violations(analysis, "confirmed") == []
    (pair,) = [b for b in analysis.summary["clocks"]["largest_skews"] if (b["a"], b["b"]) == ("p", "q")]
    assert pair["low"] <= 0.0 <= pair["high"], pair  # the one clock they share is allowed
