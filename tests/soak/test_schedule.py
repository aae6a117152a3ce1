"""The fault schedule: seeded, every kind at least once, pauses outlast the lease."""

from __future__ import annotations

import itertools
from collections import Counter

from kubecoord_testkit.soak import schedule
from kubecoord_testkit.soak.backends import BACKENDS
from kubecoord_testkit.soak.runner import all_kinds


def test_same_seed_same_schedule_and_another_seed_another() -> None:
    kinds = schedule.COMMON_KINDS
    first = schedule.make_schedule(7, 90, kinds, lease=4)
    assert first == schedule.make_schedule(7, 90, kinds, lease=4)
    assert first != schedule.make_schedule(8, 90, kinds, lease=4)


def test_every_kind_at_least_once_even_in_a_short_run() -> None:
    kinds = (*schedule.COMMON_KINDS, "x_restart", "y_restart")
    faults = schedule.make_schedule(1, 5, kinds, lease=4)
    assert Counter(f.kind for f in faults).keys() == set(kinds)
    longer = schedule.make_schedule(1, 300, kinds, lease=4)
    assert min(Counter(f.kind for f in longer).values()) >= 2
    assert longer[-1].at < 300


def test_faults_are_spaced_and_pauses_outlast_the_lease() -> None:
    faults = schedule.make_schedule(3, 200, schedule.COMMON_KINDS, lease=5)
    for before, after in itertools.pairwise(faults):
        assert after.at >= before.at + before.duration + 1.5
    assert all(f.duration > 5 for f in faults if f.kind == schedule.PAUSE)
    assert all(f.duration == 0 for f in faults if f.kind in (schedule.KILL_LEADER, schedule.CUT))


def test_every_backend_adds_its_restarts() -> None:
    for name, backend_class in BACKENDS.items():
        kinds = all_kinds(backend_class.__new__(backend_class))
        assert set(schedule.COMMON_KINDS) <= set(kinds)
        assert any(kind.endswith("_restart") for kind in kinds), name
    assert "delete_lease" in all_kinds(BACKENDS["emulator"].__new__(BACKENDS["emulator"]))
