"""A robustness history as an event log (kubecoord_testkit.robustness.eventlog): what each
operation becomes, and how the two judges' verdicts are compared. No Spark, no checker:
test_tier.py runs both judges."""

from __future__ import annotations

import json
import pathlib

from kubecoord_testkit.robustness import eventlog
from kubecoord_testkit.robustness.handmade import hold, kv


def test_acknowledged_writes_are_logged_with_their_call_as_sent_and_nothing_else_is() -> None:
    history = {"kv": [
        kv(0, 1.0, 1.1, "put", value="a", version=1),
        kv(0, 1.2, 1.3, "update", value="b", expected=1, version=2),
        kv(0, 1.4, None, "update", value="c"),  # unknown outcome: its client never learned it
        kv(1, 1.5, 1.6, "update", value="d", expected=1, status="conflict"),
        kv(1, 1.7, 1.8, "get", read="b", version=2),
        kv(1, 1.9, 2.0, "delete", expected=2),
        kv(1, 2.1, 2.2, "delete"),  # blind: the version it removed is not in the history
    ], "locks": [], "faults": []}
    found = eventlog.events(history)
    assert [(e["event"], e.get("version"), e["sent"], e["_t"]) for e in found[0]] == [
        ("put", 1, 1.0, 1.1), ("updated", 2, 1.2, 1.3)]
    assert [(e["event"], e.get("version")) for e in found[1]] == [("deleted", 2)]


def test_a_hold_is_a_term_from_acquires_return_to_its_last_claim(tmp_path: pathlib.Path) -> None:
    history = {"kv": [], "locks": [
        *hold(0, "a", (1.0, 1.1), (1.5, 1.6), token=3),
        *hold(1, "b", (2.0, 2.1), (2.5, None), token=4, lock="s", slots=2, slot=1),
    ], "faults": []}
    (path_a, path_b) = eventlog.write(history, tmp_path, "memory")
    a = [json.loads(line) for line in path_a.read_text().splitlines()]
    b = [json.loads(line) for line in path_b.read_text().splitlines()]
    assert [(e["primitive"], e["event"], e["name"], e["epoch"], e["ts"][-10:]) for e in a] == [
        ("leader_election", "acquired", "l", 3, "01.100000Z"), ("lock", "acquired", "l", 3, "01.100000Z"),
        ("leader_election", "resigned", "l", 3, "01.500000Z")]
    assert a[0]["sent"].endswith("01.000000Z") and a[0]["namespace"] == "robustness-memory"
    assert [(e["event"], e["name"]) for e in b][-1] == ("lost", "s-1")  # its end unknown: it stops claiming
    assert eventlog.lock_of("s-1") == "s" and eventlog.lock_of("robust-lock") == "robust-lock"


def test_the_verdicts_agree_only_as_the_rule_says() -> None:
    history = {"kv": [kv(0, 1.0, None, "delete", "k1"), kv(0, 2.0, 2.1, "put", "k2", version=1)], "locks": []}

    def judged(porcupine: list[dict[str, str]], pipeline: list[dict[str, str]]) -> eventlog.Agreement:
        rows = [{"namespace": "robustness-m", **row} for row in pipeline]
        return eventlog.compare("m", history, porcupine, rows)

    race = {"type": "create_race", "name": "robust"}
    overlap = {"type": "overlapping_leadership", "name": "l-0", "subject": "b"}
    assert judged([], []).agrees
    assert judged([{"model": "kv", "partition": "k2"}], []).agrees  # a stale read: not in the log
    assert not judged([], [{**race, "subject": "k2"}]).agrees
    excused = judged([], [{**race, "subject": "k1"}])  # after k1's delete of unknown outcome
    assert excused.agrees and excused.unlogged == {"k1"} and "cannot hold" in excused.describe()
    assert judged([{"model": "locks", "partition": "l"}], [overlap]).agrees
    assert not judged([{"model": "locks", "partition": "l"}], []).agrees
    assert not judged([], [overlap]).agrees
