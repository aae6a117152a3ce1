"""The judge is not vacuous: kubecoord-porcupine (testkit/porcupine, over Porcupine) rejects
hand-made histories with a lost update, a stale read, a write reported as refused that
took effect, a fenced write accepted below the highest token or refused that took
effect, two overlapping holders, a token going back, and accepts their correct twins
and the histories whose unknown outcomes explain them. On a violation it writes the
history and Porcupine's visualisations and names the smallest failing window."""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

import kubecoord
from kubecoord_testkit.robustness.checker import Verdict, check_history, find_checker, missing_reason
from kubecoord_testkit.robustness.handmade import hold, kv
from kubecoord_testkit.robustness.recording import Recorder, figures, merge

pytestmark = pytest.mark.skipif(find_checker() is None, reason=f"robustness tier: {missing_reason()}")


def judge(tmp_path: pathlib.Path, *, kv_ops: list[dict[str, Any]] | None = None,
          lock_ops: list[dict[str, Any]] | None = None) -> Verdict:
    return check_history({"kv": kv_ops or [], "locks": lock_ops or [], "faults": []}, tmp_path, timeout=60)


# A put, another client's conditional update, reads: the correct history and its broken twins.
WRITES = [
    kv(0, 1.0, 1.1, "put", value="a", version=1),
    kv(1, 1.2, 1.3, "update", value="b", expected=1, version=2),
]


def test_a_correct_history_passes(tmp_path: pathlib.Path) -> None:
    holds = [*hold(0, "a", (1.0, 1.1), (1.5, 1.6), token=1), *hold(1, "b", (1.2, 1.7), (1.8, 1.9), token=2)]
    verdict = judge(tmp_path, kv_ops=[*WRITES, kv(0, 1.4, 1.5, "get", read="b", version=2)], lock_ops=holds)
    assert verdict.ok, verdict.stderr
    assert verdict.report["kv"] == {**verdict.report["kv"], "result": "Ok", "operations": 3, "pending": 0}
    assert verdict.report["locks"]["result"] == "Ok" and verdict.report["locks"]["operations"] == 4
    assert not (tmp_path / "porcupine").exists()


def test_a_stale_read_fails_with_the_history_its_visualisation_and_the_window(tmp_path: pathlib.Path) -> None:
    verdict = judge(tmp_path, kv_ops=[*WRITES, kv(0, 1.4, 1.5, "get", read="a", version=1)])
    assert verdict.status == 1
    (violation,) = verdict.violations
    assert violation["model"] == "kv" and violation["partition"] == "k" and violation["until"] == 1.5
    assert violation["window"][-1] == 'client 0: called 1.400000, returned 1.500000: get(k) -> "a" v1'
    out = tmp_path / "porcupine"
    assert json.loads((out / "history.json").read_text())["kv"][2]["output"]["value"] == "a"
    assert "<html" in (out / "kv.html").read_text().lower()
    assert pathlib.Path(violation["visualization"]) == out / "kv-k-window.html"
    assert "NOT LINEARIZABLE: kv \"k\"" in verdict.stderr


def test_a_lost_update_fails(tmp_path: pathlib.Path) -> None:
    # Both conditional updates on version 1 acknowledged: one of them was lost.
    verdict = judge(tmp_path, kv_ops=[
        kv(0, 1.0, 1.1, "put", value="a", version=1),
        kv(1, 1.2, 1.3, "update", value="b", expected=1, version=2),
        kv(2, 1.2, 1.35, "update", value="c", expected=1, version=2),
    ])
    assert verdict.status == 1 and verdict.violations[0]["until"] == 1.35


def test_a_delete_answers_the_version_it_removed_or_fails(tmp_path: pathlib.Path) -> None:
    """The version a blind delete removed (from its client's own event log) is judged:
    the version the key had where the delete is placed, or the history has no linearization."""
    ops = [*WRITES, kv(2, 1.4, 1.5, "delete", version=2)]
    assert judge(tmp_path / "right", kv_ops=ops).ok
    assert judge(tmp_path / "unrecorded", kv_ops=[*ops[:2], kv(2, 1.4, 1.5, "delete")]).ok
    wrong = judge(tmp_path / "wrong", kv_ops=[*ops[:2], kv(2, 1.4, 1.5, "delete", version=1)])
    assert wrong.status == 1 and wrong.violations[0]["window"][-1].endswith("delete(k) -> removed v1")


def test_a_blind_update_applied_twice_fails(tmp_path: pathlib.Path) -> None:
    verdict = judge(tmp_path, kv_ops=[
        kv(0, 1.0, 1.1, "put", value="a", version=1),
        kv(1, 1.2, 1.3, "update", value="b", version=3),
    ])
    assert verdict.status == 1


def test_a_write_reported_refused_that_took_effect_fails_and_passes_as_unknown(tmp_path: pathlib.Path) -> None:
    """The Kubernetes defect's shape: put answered KeyExistsError although it created the
    key, as a read inside its interval shows; recorded as unknown, the same history passes."""
    seen = kv(1, 1.1, 1.2, "get", read="a", version=1)
    refused = judge(tmp_path / "refused", kv_ops=[kv(0, 1.0, 1.5, "put", value="a", status="exists"), seen])
    unknown = judge(tmp_path / "unknown", kv_ops=[kv(0, 1.0, None, "put", value="a"), seen])
    assert refused.status == 1
    assert unknown.ok, unknown.stderr
    assert unknown.report["kv"]["pending"] == 1


def test_a_write_reported_not_applied_must_not_have_taken_effect(tmp_path: pathlib.Path) -> None:
    """A plain BackendUnavailableError from a write says it was not applied ("refused")."""
    refused = kv(1, 1.2, 1.3, "update", value="b", expected=1, status="refused")
    honest = judge(tmp_path / "honest", kv_ops=[WRITES[0], refused, kv(0, 1.4, 1.5, "get", read="a", version=1)])
    applied = judge(tmp_path / "applied", kv_ops=[WRITES[0], refused, kv(0, 1.4, 1.5, "get", read="b", version=2)])
    assert honest.ok, honest.stderr
    assert applied.status == 1


def test_an_unknown_outcome_may_or_may_not_have_taken_effect(tmp_path: pathlib.Path) -> None:
    pending = kv(1, 1.2, None, "update", value="b", expected=1)
    applied = judge(tmp_path / "applied", kv_ops=[WRITES[0], pending, kv(0, 1.4, 1.5, "get", read="b", version=2)])
    not_applied = judge(tmp_path / "not", kv_ops=[WRITES[0], pending, kv(0, 1.4, 1.5, "get", read="a", version=1)])
    both = judge(tmp_path / "flip", kv_ops=[WRITES[0], pending, kv(0, 1.4, 1.5, "get", read="b", version=2),
                                            kv(0, 1.6, 1.7, "get", read="a", version=1)])
    assert applied.ok and not_applied.ok
    assert both.status == 1, "an unknown write took effect, then was undone"


def test_definite_failures_are_judged(tmp_path: pathlib.Path) -> None:
    good = judge(tmp_path / "good", kv_ops=[
        kv(0, 1.0, 1.1, "put", value="a", version=1),
        kv(0, 1.2, 1.3, "put", value="x", status="exists"),
        kv(0, 1.4, 1.5, "update", value="x", expected=7, status="conflict"),
        kv(0, 1.6, 1.7, "delete", expected=1),
        kv(0, 1.8, 1.9, "delete", status="notfound"),
        kv(0, 2.0, 2.1, "update", value="x", status="notfound"),
        kv(0, 2.2, 2.3, "get", status="notfound"),
    ])
    bad = judge(tmp_path / "bad", kv_ops=[kv(0, 1.0, 1.1, "put", value="a", version=1),
                                          kv(0, 1.4, 1.5, "update", value="x", expected=1, status="conflict")])
    assert good.ok, good.stderr
    assert bad.status == 1


# Fenced writes: a holder with token 2 wrote; the earlier holder (token 1) writes late.
FENCED = [
    kv(0, 1.0, 1.1, "put", value="init", version=1),
    kv(1, 1.2, 1.3, "update", value="b", version=2, fence=2),
]


def test_a_late_write_refused_with_fenced_error_passes_and_accepted_fails(tmp_path: pathlib.Path) -> None:
    refused = judge(tmp_path / "refused", kv_ops=[*FENCED, kv(0, 1.4, 1.5, "update", value="a", fence=1,
                                                               status="fenced")])
    accepted = judge(tmp_path / "accepted", kv_ops=[*FENCED, kv(0, 1.4, 1.5, "update", value="a", fence=1,
                                                                version=3)])
    assert refused.ok, refused.stderr
    assert accepted.status == 1, "a token below the highest accepted was accepted"
    assert "fence token 1" in accepted.violations[0]["window"][-1]


def test_a_fenced_write_is_refused_only_below_the_mark(tmp_path: pathlib.Path) -> None:
    """An equal token is the same holder writing again; a higher one raises the mark; a
    FencedError for either is a false refusal."""
    equal = judge(tmp_path / "equal", kv_ops=[*FENCED, kv(1, 1.4, 1.5, "update", value="c", version=3, fence=2)])
    wrongly = judge(tmp_path / "wrongly", kv_ops=[*FENCED, kv(2, 1.4, 1.5, "update", value="c", fence=3,
                                                              status="fenced")])
    raised = judge(tmp_path / "raised", kv_ops=[
        *FENCED, kv(2, 1.4, 1.5, "update", value="c", version=3, fence=5),
        kv(1, 1.6, 1.7, "update", value="d", fence=2, status="fenced"),
    ])
    assert equal.ok and raised.ok, equal.stderr + raised.stderr
    assert wrongly.status == 1


def test_a_fenced_error_write_that_took_effect_fails(tmp_path: pathlib.Path) -> None:
    """FencedError says nothing was written: a read of the late write's value says otherwise."""
    late = kv(0, 1.4, 1.5, "update", value="a", fence=1, status="fenced")
    clean = judge(tmp_path / "clean", kv_ops=[*FENCED, late, kv(1, 1.6, 1.7, "get", read="b", version=2)])
    written = judge(tmp_path / "written", kv_ops=[*FENCED, late, kv(1, 1.6, 1.7, "get", read="a", version=3)])
    assert clean.ok, clean.stderr
    assert written.status == 1


def test_a_late_write_of_unknown_outcome_may_only_land_before_the_higher_token(tmp_path: pathlib.Path) -> None:
    """Unknown: it took effect where a linearization places it, if its token admitted it."""
    pending = kv(0, 1.0, None, "update", value="a", fence=1)
    before = judge(tmp_path / "before", kv_ops=[*FENCED, pending, kv(1, 1.6, 1.7, "get", read="b", version=2)])
    after = judge(tmp_path / "after", kv_ops=[*FENCED, kv(0, 1.4, None, "update", value="a", fence=1),
                                              kv(1, 1.6, 1.7, "get", read="a", version=3)])
    assert before.ok, before.stderr
    assert after.status == 1, "a token-1 write landed after token 2 was accepted"


def test_unfenced_writes_neither_meet_nor_move_the_mark(tmp_path: pathlib.Path) -> None:
    verdict = judge(tmp_path, kv_ops=[
        *FENCED, kv(2, 1.4, 1.5, "update", value="x", version=3),
        kv(1, 1.6, 1.7, "update", value="y", version=4, fence=2),
        kv(0, 1.8, 1.9, "update", value="z", fence=1, status="fenced"),
    ])
    assert verdict.ok, verdict.stderr


def test_two_overlapping_holders_fail(tmp_path: pathlib.Path) -> None:
    # b's acquire returned at 1.3 while a still claimed the lock (last is_held() at 1.4).
    verdict = judge(tmp_path, lock_ops=[*hold(0, "a", (1.0, 1.1), (1.4, 1.5), token=1),
                                        *hold(1, "b", (1.05, 1.3), (1.6, 1.7), token=2)])
    assert verdict.status == 1
    (violation,) = verdict.violations
    assert violation["model"] == "locks" and violation["until"] == 1.3


def test_a_token_going_back_fails(tmp_path: pathlib.Path) -> None:
    verdict = judge(tmp_path, lock_ops=[*hold(0, "a", (1.0, 1.1), (1.2, 1.3), token=5),
                                        *hold(1, "b", (1.4, 1.5), (1.6, 1.7), token=4)])
    assert verdict.status == 1


def test_a_killed_holder_ends_at_an_unknown_moment_after_its_last_claim(tmp_path: pathlib.Path) -> None:
    after = judge(tmp_path / "after", lock_ops=[*hold(0, "a", (1.0, 1.1), (1.4, None), token=1),
                                                *hold(1, "b", (1.2, 1.6), (1.7, 1.8), token=2)])
    during = judge(tmp_path / "during", lock_ops=[*hold(0, "a", (1.0, 1.1), (1.4, None), token=1),
                                                 *hold(1, "b", (1.2, 1.3), (1.7, 1.8), token=2)])
    assert after.ok, after.stderr
    assert after.report["locks"]["pending"] == 1
    assert during.status == 1


def test_a_semaphore_allows_its_holders_one_per_slot_tokens_per_slot(tmp_path: pathlib.Path) -> None:
    two = [*hold(0, "a", (1.0, 1.1), (1.5, 1.6), token=3, slots=2, slot=0),
           *hold(1, "b", (1.0, 1.2), (1.5, 1.6), token=1, slots=2, slot=1)]
    same_slot = judge(tmp_path / "slot", lock_ops=[
        *hold(0, "a", (1.0, 1.1), (1.5, 1.6), token=1, slots=2, slot=0),
        *hold(1, "b", (1.0, 1.2), (1.5, 1.6), token=2, slots=2, slot=0),
    ])
    third = hold(2, "c", (1.0, 1.3), (1.5, 1.6), token=9, slots=2, slot=2)
    beyond = judge(tmp_path / "beyond", lock_ops=[*two, *third])
    assert judge(tmp_path / "two", lock_ops=two).ok
    assert same_slot.status == 1 and beyond.status == 1


def test_bad_input_is_refused_with_status_2(tmp_path: pathlib.Path) -> None:
    binary = find_checker()
    assert binary is not None
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"kv": [kv(0, 1.0, 1.1, "increment")]}))
    done = subprocess.run([str(binary), str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "unknown kv op" in done.stderr
    path.write_text(json.dumps({"kv": [kv(0, 1.0, 1.1, "update", value="v", status="fenced")]}))
    done = subprocess.run([str(binary), str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "without a fence" in done.stderr


def test_records_merge_into_a_history_with_pending_operations(tmp_path: pathlib.Path) -> None:
    """A client killed mid-write leaves a call without a return, a hold without an end and
    maybe half a line: the call is pending, the hold ends after its last claim."""
    records = tmp_path / "records"
    records.mkdir()
    recorder = Recorder(records / "kv-0-1.jsonl", "kv-0-1")
    op, _ = recorder.call({"op": "put", "key": "k", "value": "kv-0-1:1"})
    recorder.returned(op, {"status": "ok", "version": 1})
    read, _ = recorder.call({"op": "get", "key": "k"})
    recorder.drop(read)
    recorder.call({"op": "update", "key": "k", "value": "kv-0-1:2"})
    recorder.close()
    holder = Recorder(records / "lock-0-1.jsonl", "lock-0-1")
    first = holder.acquired("l", 1, 0, 7, call=0.5)
    holder.held(first, 1.0e9)
    holder.close()
    with open(records / "lock-0-1.jsonl", "a") as file:
        file.write('{"e":"held","hold":1,"at":')  # cut short by kill -9
    history = merge(records)
    assert [op["input"]["op"] for op in history["kv"]] == ["put", "update"]
    assert history["kv"][1]["return"] is None and history["kv"][1]["client"] == 0
    acquire, end = history["locks"]
    assert acquire["input"] == {
        "op": "acquire", "token": 7, "lock": "l", "max_holders": 1, "holder": "lock-0-1", "slot": 0,
    }
    assert end["call"] == 1.0e9 and end["return"] is None and end["client"] == 1
    assert figures(history) == {"kv_operations": 2, "kv_pending": 1, "holds": 1, "holds_end_unknown": 1,
                                "operations": 4, "pending": 2, "fenced_writes": 0, "fenced_refused": 0}


def test_a_mark_set_by_a_write_of_unknown_outcome_that_a_read_saw_refuses_lower_tokens(
    tmp_path: pathlib.Path,
) -> None:
    """Token 5's write never answered, but a read saw it: it took effect before the read, so
    the mark is 5 from then on and token 2's write after the read must be refused. Seen by
    nobody, the same unknown write may land last, and token 2 is then accepted."""
    pending = kv(2, 1.35, None, "update", value="c", fence=5)
    seen = kv(0, 1.5, 1.6, "get", read="c", version=3)
    accepted_after = kv(1, 1.7, 1.8, "update", value="d", fence=2, version=4)
    wrongly = judge(tmp_path / "seen", kv_ops=[*FENCED, pending, seen, accepted_after])
    unseen = judge(tmp_path / "unseen", kv_ops=[*FENCED, pending, kv(1, 1.7, 1.8, "update", value="d", fence=2,
                                                                     version=3)])
    assert wrongly.status == 1, "a token below a mark a read had proven was accepted"
    assert unseen.ok, unseen.stderr


def test_a_fenced_error_write_that_took_effect_fails_when_only_its_version_shows(tmp_path: pathlib.Path) -> None:
    """The late write refused with FencedError bumped the version (a value rewritten equal):
    the read's version 3 cannot be explained without it."""
    late = kv(0, 1.4, 1.5, "update", value="b", fence=1, status="fenced")
    verdict = judge(tmp_path, kv_ops=[*FENCED, late, kv(1, 1.6, 1.7, "get", read="b", version=3)])
    assert verdict.status == 1


def test_a_fenced_delete_below_the_mark_that_took_effect_fails(tmp_path: pathlib.Path) -> None:
    gone = [*FENCED, kv(0, 1.4, 1.5, "delete", fence=1, status="fenced"), kv(1, 1.6, 1.7, "get", status="notfound")]
    assert judge(tmp_path, kv_ops=gone).status == 1


def test_acknowledged_deletes_take_the_version_their_clients_own_log_names(tmp_path: pathlib.Path) -> None:
    """The tier's KV clients log kubecoord's own events (connect(history=...)); merge gives
    each acknowledged delete the version its ``deleted`` event names."""
    records, own = tmp_path / "records", tmp_path / "own"
    records.mkdir()
    own.mkdir()
    coord = kubecoord.connect("memory://own-log", history=str(own / "kv-0-1.jsonl"))
    store = coord.storage("robust")
    recorder = Recorder(records / "kv-0-1.jsonl", "kv-0-1")
    writes: list[tuple[str, Callable[[], int | None]]] = [
        ("put", lambda: store.put("k", "a")), ("update", lambda: store.update("k", "b")),
        ("delete", lambda: store.delete("k")), ("put", lambda: store.put("k", "c")),
        ("delete", lambda: store.delete("k", expected_version=1)),
    ]
    for kind, write in writes:
        op, _ = recorder.call({"op": kind, "key": "k"})
        version = write()
        recorder.returned(op, {"status": "ok"} if version is None else {"status": "ok", "version": version})
    miss, _ = recorder.call({"op": "delete", "key": "k"})
    recorder.returned(miss, {"status": "notfound"})
    recorder.close()
    coord.close()
    deletes = [op["output"] for op in merge(records, own=own)["kv"] if op["input"]["op"] == "delete"]
    assert deletes == [{"status": "ok", "version": 2}, {"status": "ok", "version": 1}, {"status": "notfound"}]


def test_a_logged_event_belongs_to_the_delete_whose_interval_holds_it() -> None:
    from kubecoord_testkit.robustness.recording import attach_deleted_versions

    ops = [kv(0, 1.0, 1.1, "delete"), kv(0, 2.0, None, "delete"), kv(0, 3.0, 3.1, "delete"),
           kv(0, 4.0, 4.1, "delete")]
    for op in ops:
        if op["output"] is not None:
            op["output"] = {"status": "ok"}
    # The pending delete's event is there, the last one's is not (dropped with its killed client).
    attach_deleted_versions(ops, {"k": [(1.05, 4), (2.5, 2), (3.05, 7)]})
    assert [(op["output"] or {}).get("version") for op in ops] == [4, None, 7, None]
    unstamped = [kv(0, 1.0, 1.1, "delete"), kv(0, 2.0, None, "delete"), kv(0, 3.0, 3.1, "delete")]
    for op in unstamped:
        if op["output"] is not None:
            op["output"] = {"status": "ok"}
    attach_deleted_versions(unstamped, {"k": [(None, 4), (None, 2)]})  # no mono: by order, until an unknown
    assert [(op["output"] or {}).get("version") for op in unstamped] == [4, None, None]
