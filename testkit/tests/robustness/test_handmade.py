"""Violations injected into a recorded history (kubecoord_testkit.robustness.handmade.inject):
each is placed where nothing else in the history can explain it, so Porcupine flags each,
and only it. tests/robustness injects them into the tier's real histories, where the
pipeline must flag them too."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from kubecoord_testkit.robustness.checker import check_history, find_checker, missing_reason
from kubecoord_testkit.robustness.handmade import hold, inject, kv


def recorded() -> dict[str, Any]:
    """A linearizable history shaped like the tier's: k0 with a pending write before every
    update, k1 with one update overlapped by another write and one standing alone; a lock
    held by a then b; a semaphore slot held by c, d, then c again, the other slot by e."""
    kv_ops = [
        kv(0, 1.0, 1.1, "put", "k0", value="a", version=1),
        kv(1, 1.2, None, "update", "k0", value="b"),  # unknown outcome: may explain a repeat
        kv(0, 1.5, 1.6, "update", "k0", value="c", expected=1, version=2),
        kv(0, 2.0, 2.1, "put", "k1", value="d", version=1),
        kv(0, 2.2, 2.4, "update", "k1", value="e", version=2),
        kv(2, 2.3, 2.5, "get", "k1", read="e", version=2),
        kv(2, 2.35, 2.45, "update", "k1", value="f", version=3, fence=4),
        kv(0, 2.6, 2.7, "update", "k1", value="g", version=4),
    ]
    lock_ops = [
        *hold(3, "a", (1.0, 1.1), (1.5, 1.6), token=1, lock="robust-lock"),
        *hold(4, "b", (1.55, 1.7), (2.0, 2.1), token=2, lock="robust-lock"),
        *hold(5, "c", (1.0, 1.1), (1.4, 1.5), token=2, lock="robust-sem", slots=2, slot=0),
        *hold(6, "d", (1.6, 1.7), (2.0, None), token=3, lock="robust-sem", slots=2, slot=0),
        *hold(7, "e", (1.2, 1.3), (1.9, 2.0), token=1, lock="robust-sem", slots=2, slot=1),
        *hold(5, "c", (2.2, 2.3), (2.5, 2.6), token=5, lock="robust-sem", slots=2, slot=0),
    ]
    return {"kv": kv_ops, "locks": lock_ops, "faults": []}


def test_each_injection_lands_where_nothing_else_explains_it() -> None:
    history = recorded()
    injected = inject(history)
    assert (injected.lost_update, injected.overlap, injected.token_back) == ("k1", "robust-lock", "robust-sem")
    assert injected.history["kv"][:-1] == history["kv"] and history == recorded()  # a copy; the original kept
    twin = injected.history["kv"][-1]
    assert (twin["call"], twin["return"], twin["output"]["version"], twin["client"]) == (2.6, 2.7, 4, 8)
    a_end = injected.history["locks"][1]
    assert a_end["call"] == pytest.approx((1.7 + 2.0) / 2) and a_end["return"] == a_end["call"]
    assert injected.history["locks"][10]["input"]["token"] == 1  # c's second hold: below its first's 2


@pytest.mark.skipif(find_checker() is None, reason=f"robustness tier: {missing_reason()}")
def test_porcupine_flags_every_injection_and_nothing_else(tmp_path: pathlib.Path) -> None:
    assert check_history(recorded(), tmp_path / "recorded", timeout=60).ok
    verdict = check_history(inject(recorded()).history, tmp_path / "injected", timeout=60)
    assert verdict.status == 1, verdict.stderr
    assert {(v["model"], v["partition"]) for v in verdict.violations} == {
        ("kv", "k1"), ("locks", "robust-lock"), ("locks", "robust-sem")}


def test_a_history_with_no_place_for_an_injection_is_refused() -> None:
    history = recorded()
    history["kv"] = [op for op in history["kv"] if op["input"]["key"] == "k0"]
    with pytest.raises(ValueError, match="lost update"):
        inject(history)
    history = recorded()
    history["locks"] = history["locks"][:2] + history["locks"][4:]  # the lock held once
    with pytest.raises(ValueError, match="overlap"):
        inject(history)
    history = recorded()
    history["locks"] = history["locks"][:10]  # no holder held a slot twice
    with pytest.raises(ValueError, match="token going back"):
        inject(history)
