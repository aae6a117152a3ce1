"""Small helpers shared by the test suites: waiting on conditions and recording callbacks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


def eventually(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01) -> None:
    """Wait until ``predicate()`` is true; fail the test with a clear message otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {getattr(predicate, '__name__', predicate)}")
        time.sleep(interval)


class Recorder(Generic[T]):
    """A listener that records every call and lets a test wait for a condition on them."""

    def __init__(self) -> None:
        self.calls: list[T] = []
        self._cond = threading.Condition()

    def __call__(self, value: T) -> None:
        with self._cond:
            self.calls.append(value)
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[T]], bool], timeout: float = 10.0) -> list[T]:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.calls), timeout):
                raise AssertionError(f"listener calls never satisfied the condition; calls: {self.calls!r}")
            return list(self.calls)

    def wait_last(self, expected: T, timeout: float = 10.0) -> list[T]:
        """Wait until the latest call equals ``expected`` (listeners may coalesce changes)."""
        return self.wait_for(lambda calls: bool(calls) and calls[-1] == expected, timeout)
