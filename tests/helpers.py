"""Small helpers shared by the test suites: waiting on conditions, recording callbacks, and a
record table that fails like an unreachable server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from kubecoord import BackendUnavailableError
from kubecoord._core.lease import LeaderRecord
from kubecoord.backends.memory.records import RecordTable

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


class UnreachableTable(RecordTable):
    """memory://'s record table with switches: ``down`` fails reads and writes like an
    unreachable server, ``reads_down`` reads only. ``answering`` runs after a write is
    applied, before its answer returns (a slow reply, a log of the writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.reads_down = False

    def read(self, name: str) -> tuple[LeaderRecord, int] | None:
        if self.down or self.reads_down:
            raise BackendUnavailableError("server down")
        return super().read(name)

    def write(self, name: str, record: LeaderRecord, expected: int | None) -> int:
        if self.down:
            raise BackendUnavailableError("server down")
        version = super().write(name, record, expected)
        self.answering(record)
        return version

    def answering(self, record: LeaderRecord) -> None:
        """The write of ``record`` is applied; its answer is not back yet."""
