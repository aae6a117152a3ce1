"""Server processes started on 127.0.0.1 by tests, benchmarks and local tooling: a free
port, a readiness wait and the context-manager shape (stopping them is
kubecoord._internal.processes).

Guarantees: ``wait_ready`` returns only once ``ready()`` said so, and fails at once (not
at the deadline) when the server process is gone; a ``ManagedServers`` whose start fails
half-way stops what it did start before the error propagates.
Not guaranteed: a port from ``free_port`` can be taken by someone else before the server
binds it (the server then exits: callers retry on new ports or report it).
"""

from __future__ import annotations

import contextlib
import pathlib
import socket
import subprocess
import time
import urllib.error
from collections.abc import Callable
from types import TracebackType
from typing import IO, Self

from kubecoord_testkit import processes

NOT_READY_YET = (OSError, ValueError, urllib.error.URLError)
"""What a readiness check may raise while the server is still starting (refused
connections, resets, half-written answers)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ready(
    ready: Callable[[], bool],
    *,
    what: str,
    timeout: float,
    gone: Callable[[], str | None],
    fail: Callable[[str], Exception],
    interval: float = 0.2,
) -> None:
    """Poll ``ready()`` until it returns True. ``gone()`` names a process that exited (or
    None): then, or after ``timeout`` seconds, ``fail(message)`` is raised. Errors of an
    unready server (NOT_READY_YET) count as not ready."""
    deadline = time.monotonic() + timeout
    while True:
        dead = gone()
        if dead is not None:
            raise fail(f"{what}: {dead}")
        with contextlib.suppress(*NOT_READY_YET):
            if ready():
                return
        if time.monotonic() >= deadline:
            raise fail(f"{what} not ready within {timeout:.0f} s")
        time.sleep(interval)


class ManagedServers:
    """A context manager over ``start()`` and ``stop()``: ``stop()`` runs on leaving the
    block and when ``start()`` fails, so it must cope with a partial start."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


class LoggedProcess:
    """One server process: its own session (signals reach it alone), output to a log file,
    always reaped on stop() and kill()."""

    def __init__(self, name: str, argv: list[str], log: pathlib.Path, *, stop_timeout: float = 20.0) -> None:
        self.name, self.log, self.stop_timeout = name, log, stop_timeout
        self._log_file: IO[bytes] = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM, kill -9 after ``stop_timeout``; reaped either way."""
        try:
            processes.stop(self.popen, self.stop_timeout)
        finally:
            self._log_file.close()

    def kill(self) -> None:
        """kill -9 at once, reaped."""
        try:
            processes.stop(self.popen, 0.0, signum=9)
        finally:
            self._log_file.close()
