"""Small helpers shared by the test suites: waiting on conditions, recording callbacks, a
child Python process started and waited for until it says it is ready, an elector of the
lease core as memory:// builds one, a record table that fails like an unreachable server,
and a scripted one that fails, delays or loses the answer of any call a test chooses."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from kubecoord import BackendUnavailableError, Fence, FencedError, OutcomeUnknownError, Storage
from kubecoord._core.lease import Elector, LeaderRecord, RecordStore, Timings
from kubecoord._internal.clock import Clock
from kubecoord.backends.memory.records import RecordTable

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
"""The checkout: child processes run ``python -m tests.…`` from here."""


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


def spawn_ready(module_and_args: list[str], name: str, stderr: Path) -> subprocess.Popen[str]:
    """``python -m MODULE ARGS…`` from the checkout, unbuffered, its stderr to ``stderr``,
    once its first line of output says "ready" (within 60 s; else it is killed and the
    assertion shows its stderr). Its stdout stays a pipe of the caller's."""
    with open(stderr, "w") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", *module_and_args], cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    ready = threading.Event()

    def signal_ready() -> None:
        if process.stdout and "ready" in process.stdout.readline():
            ready.set()

    threading.Thread(target=signal_ready, daemon=True).start()
    if not ready.wait(60):
        process.kill()
        process.wait()
        raise AssertionError(f"{name} never got ready; its stderr:\n{stderr.read_text()}")
    return process


class NoMetrics:
    """Lease metrics that record nothing: the electors a test builds leave the process's
    client metrics alone."""

    def leadership(self, backend: str, service: str, candidate: str, leading: bool) -> None:
        return None

    def renewed(self, backend: str, seconds: float) -> None:
        return None


def elector(candidate: str, store: RecordStore, clock: Clock, timings: Timings, **options: Any) -> Elector:
    """An Elector of ``candidate`` over ``store`` as memory:// builds one: service "svc",
    no data, a change callback that does nothing, unless ``options`` (any of Elector's
    other keywords: service, on_change, events, metrics, wall, request_timeout, ...) say
    otherwise."""
    settings: dict[str, Any] = {"service": "svc", "data": "", "on_change": lambda _elector, _leading: None,
                                "backend": "memory", **options}
    return Elector(candidate=candidate, store=store, timings=timings, clock=clock, **settings)


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


FaultKind = Literal["ok", "fail", "lost", "slow", "late"]


@dataclass(frozen=True)
class Fault:
    """What one call of a ScriptedTable does.

    - ``ok``: answered at once;
    - ``fail``: refused before it reaches the store (a server down, a request timeout
      before sending): BackendUnavailableError, nothing applied;
    - ``lost``: a write is applied but its answer is lost (a cut connection, a timeout
      after the commit): OutcomeUnknownError; a read fails as ``fail`` does;
    - ``slow``: applied at once, answered ``delay`` seconds later (the clock moves while
      the answer travels);
    - ``late``: held ``delay`` seconds in transit, then applied and answered (another
      participant's request sent after it may be applied first)."""

    kind: FaultKind = "ok"
    delay: float = 0.0


class ScriptedTable(RecordTable):
    """memory://'s record table driven by a script: every read and write takes the next
    Fault of ``script`` (``ok`` once it is empty). ``advance`` moves the test's clock for
    ``slow`` and ``late`` calls. Every applied write is kept in ``applied`` with the
    ``caller`` the test named before the call (the record's history, to judge views by);
    ``calls`` counts every call that reached the script. With ``faulty_reads`` False reads
    are always answered (memory://'s own handles read the table as their watch, which
    cannot fail in one process)."""

    def __init__(self, advance: Callable[[float], None] | None = None, *, faulty_reads: bool = True) -> None:
        super().__init__()
        self._faulty_reads = faulty_reads
        self.script: list[Fault] = []
        self.caller = ""
        self.applied: list[tuple[str, str, LeaderRecord, int]] = []
        self.calls = 0
        self._advance = advance

    def _next(self) -> Fault:
        self.calls += 1
        return self.script.pop(0) if self.script else Fault()

    def _move(self, seconds: float) -> None:
        if seconds and self._advance is not None:
            self._advance(seconds)

    def read(self, name: str) -> tuple[LeaderRecord, int] | None:
        if not self._faulty_reads:
            return super().read(name)
        fault = self._next()
        if fault.kind in ("fail", "lost"):
            raise BackendUnavailableError("scripted: read failed")
        if fault.kind == "late":
            self._move(fault.delay)
        current = super().read(name)
        if fault.kind == "slow":
            self._move(fault.delay)
        return current

    def history(self, name: str) -> list[tuple[LeaderRecord, int]]:
        """Every version of ``name`` written so far, oldest first (a watch may deliver any
        of them late)."""
        return [(record, version) for _, written, record, version in self.applied if written == name]

    def write(self, name: str, record: LeaderRecord, expected: int | None) -> int:
        fault = self._next()
        if fault.kind == "fail":
            raise BackendUnavailableError("scripted: write refused before sending")
        if fault.kind == "late":
            self._move(fault.delay)
        version = super().write(name, record, expected)
        self.applied.append((self.caller, name, record, version))
        if fault.kind == "lost":
            raise OutcomeUnknownError("scripted: write applied, answer lost")
        if fault.kind == "slow":
            self._move(fault.delay)
        return version


class FencedWrites:
    """The state machines' fenced-write rule over one fencing domain: a write fenced with a
    token is refused exactly when a higher token was accepted before, and never while its
    writer still holds (leads, or holds the lock) with that token."""

    def __init__(self) -> None:
        self.accepted = 0  # the highest fencing token the storage accepted
        self.writes = 0

    def write(self, storage: Storage, op: str, writer: str, fence: Fence, *, holding: bool) -> None:
        """One ``op`` (put, update or delete) by ``writer``; ``holding``: whether it held
        with ``fence``'s token just before."""
        self.writes += 1
        key = f"k{self.writes}"
        try:
            if op == "put":
                storage.put(key, writer, fence=fence)
            elif op == "update":
                storage.update("k", writer, fence=fence)
            else:
                storage.put(key, "")
                storage.delete(key, fence=fence)
        except FencedError:
            assert fence.token < self.accepted, (
                f"fenced with {fence.token} although the highest accepted is {self.accepted}"
            )
            assert not holding, f"{writer} holds with token {fence.token} and its write was fenced"
            return
        assert fence.token >= self.accepted, f"token {fence.token} accepted after {self.accepted}"
        self.accepted = fence.token
