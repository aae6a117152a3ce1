"""The lease core's Loop (kubecoord._core.lease.loop): a step that returns PARKED is not
run again until wake(); any other delay is still capped by MAX_SLEEP."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import pytest

from kubecoord._core.lease import PARKED, LeaderRecord, Loop, Timings, from_unix, released
from kubecoord._core.lease import loop as loop_module
from kubecoord._core.lease.election import Candidate
from kubecoord._internal.clock import MonotonicClock
from kubecoord.backends.memory.records import RecordTable, TableView

from ..helpers import elector as memory_elector
from ..helpers import eventually


def test_a_parked_loop_takes_no_step_until_woken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_module, "MAX_SLEEP", 0.05)  # an unparked loop would step 20 times a second
    steps: list[float] = []
    lock = threading.Lock()

    def step() -> float:
        with lock:
            steps.append(time.monotonic())
        return PARKED

    loop = Loop("parked", step)
    loop.start()
    try:
        eventually(lambda: len(steps) == 1)
        time.sleep(0.5)
        assert len(steps) == 1
        loop.wake()
        eventually(lambda: len(steps) == 2)
        time.sleep(0.5)
        assert len(steps) == 2
    finally:
        loop.stop()


def test_a_long_delay_is_still_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_module, "MAX_SLEEP", 0.05)
    steps: list[float] = []

    def step() -> float:
        steps.append(time.monotonic())
        return 3600.0

    loop = Loop("capped", step)
    loop.start()
    try:
        eventually(lambda: len(steps) >= 3, timeout=10)
    finally:
        loop.stop()


def test_a_poke_that_acquires_reschedules_the_loop_for_the_renewals() -> None:
    """Cassandra's poller (and memory's watch) step a candidate from their own thread when
    the record changes. A follower's Loop was set to wake at the lease's expiry, seconds
    away; the poke that made it leader must bring its renewals forward. Before: the first
    renewal waited for that stale schedule, past the renew deadline (the interop test's
    k1: first renewal 1.9 s after acquiring with a 0.4 s retry period; seed2 took over when
    it came later than 2.4 s)."""
    clock = MonotonicClock()
    timings = Timings(lease_duration=4, renew_deadline=1, retry_period=0.25)
    table = RecordTable()
    table.write("svc", LeaderRecord("x", 4, None, None, 1), None)  # somebody else holds it
    view = TableView(table, "svc", clock)
    view.deliver()
    elector = memory_elector("b", view, clock, timings)
    candidate = Candidate(elector, view, timings, clock)
    candidate.loop = Loop("poked", candidate.run, lock=elector.step_lock)
    candidate.loop.start()
    try:
        eventually(lambda: candidate.due > 0)  # the Loop's step: wait ~4 s for the expiry
        current = table.read("svc")
        assert current is not None
        table.write("svc", released(current[0], from_unix(time.time())), current[1])
        view.deliver()
        candidate.poke()  # the watch's thread steps it: it acquires
        assert elector.is_leader()
        time.sleep(timings.renew_deadline + 0.5)
        assert elector.is_leader(), "the Loop did not renew within the renew deadline"
    finally:
        candidate.loop.stop()



def test_a_step_blocked_in_the_only_worker_does_not_hold_up_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """One Loop's step blocks (a slow API server) in the only worker while another Loop's
    steps come due: a worker must be started for them, though nothing wakes or schedules
    anything meanwhile. (Workers were started only when a step was scheduled or taken: the
    other Loop's renewals waited for the blocked step, past their renew deadline.)"""
    monkeypatch.setattr(loop_module, "_scheduler", loop_module._Scheduler())
    monkeypatch.setattr(loop_module, "MAX_SLEEP", 0.2)
    unblocked = threading.Event()
    renewals: list[float] = []

    def blocked() -> float:
        unblocked.wait(30)
        return 0.05

    def renew() -> float:
        renewals.append(time.monotonic())
        return 0.1

    renewing = Loop("renewing", renew)
    renewing.start()
    eventually(lambda: len(renewals) == 1)
    stuck = Loop("stuck", blocked)
    stuck.start()
    try:
        time.sleep(0.3)  # the stuck step now holds the only worker
        eventually(lambda: len(renewals) >= 10, timeout=15)
        gaps = [later - earlier for earlier, later in itertools.pairwise(renewals)]
        assert max(gaps[2:]) < 0.1 + 2.0, gaps  # due every 0.1 s, late by OVERDUE (0.25 s) once
    finally:
        unblocked.set()
        stuck.stop()
        renewing.stop()


def test_extra_workers_end_under_steady_light_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst of blocked steps grows the pool; the light steady work after it must not keep
    the extra workers alive. (Idle workers were woken in turn, so each got a step every few
    milliseconds and none was ever idle IDLE_SECONDS: the pool stayed at the burst's size.)"""
    scheduler = loop_module._Scheduler()
    monkeypatch.setattr(loop_module, "_scheduler", scheduler)
    monkeypatch.setattr(loop_module, "IDLE_SECONDS", 1.0)
    monkeypatch.setattr(loop_module, "MAX_SLEEP", 0.2)
    unblocked = threading.Event()

    def step_of(first_blocks: bool) -> Callable[[], float]:
        first = [first_blocks]

        def step() -> float:
            if first[0]:
                first[0] = False
                unblocked.wait(30)  # a step stuck on a slow server
            time.sleep(0.001)
            return 0.05

        return step

    loops = [Loop(f"light-{i}", step_of(i < 6)) for i in range(12)]
    for loop in loops:
        loop.start()
    try:
        eventually(lambda: scheduler._workers >= 6, timeout=15)
        unblocked.set()  # now 12 loops step every 50 ms, a millisecond each: one worker's work
        eventually(lambda: scheduler._workers <= 2, timeout=20)
    finally:
        for loop in loops:
            loop.stop()
