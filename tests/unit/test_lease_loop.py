"""The lease core's Loop (kubecoord._core.lease.loop): a step that returns PARKED is not
run again until wake(); any other delay is still capped by MAX_SLEEP."""

from __future__ import annotations

import threading
import time

import pytest

from kubecoord._core.lease import PARKED, Loop
from kubecoord._core.lease import loop as loop_module

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
    loop = Loop("capped", lambda: steps.append(time.monotonic()) or 3600.0)
    loop.start()
    try:
        eventually(lambda: len(steps) >= 3, timeout=10)
    finally:
        loop.stop()
