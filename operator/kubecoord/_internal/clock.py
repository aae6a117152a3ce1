"""Clocks: the monotonic one for production and a manual one for deterministic tests.

Expiry is always judged on the local monotonic clock from the moment a change was
observed, never by comparing another machine's timestamps with ours.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    """Seconds on a monotonic scale, and a way to be woken when time moves."""

    def now(self) -> float: ...

    def on_advance(self, callback: Callable[[], None]) -> None:
        """Register a callback run after the clock jumps (manual clocks only)."""


class MonotonicClock:
    """time.monotonic(); time moves by itself, so on_advance callbacks never run."""

    def now(self) -> float:
        return time.monotonic()

    def on_advance(self, callback: Callable[[], None]) -> None:
        return None


class ManualClock:
    """A clock that moves only when advance() is called — for tests without sleeps."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock cannot go backwards")
        with self._lock:
            self._now += seconds
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def on_advance(self, callback: Callable[[], None]) -> None:
        with self._lock:
            self._callbacks.append(callback)
