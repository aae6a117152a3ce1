"""Stopping child processes the one way every server, worker and operator we start is
stopped: ask, wait a bounded time, kill -9, and always reap (PID 1 does not reap orphans
here, and an unreaped child holds its ports and files)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterable
from typing import Any


def stop(process: subprocess.Popen[Any], timeout: float, *, signum: int = signal.SIGTERM) -> int:
    """Send ``signum`` (SIGTERM by default), wait up to ``timeout`` seconds, then kill -9;
    returns the exit status once the process is reaped."""
    return stop_all([process], timeout, signum=signum)[0]


def stop_all(processes: Iterable[subprocess.Popen[Any]], timeout: float, *, signum: int = signal.SIGTERM) -> list[int]:
    """:func:`stop` for several processes at once: all are signalled first, so they shut
    down side by side within one shared ``timeout``; returns their exit statuses in order."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGCONT)  # a stopped (SIGSTOP) process cannot act on signum
                process.send_signal(signum)
    deadline = time.monotonic() + timeout
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            codes.append(process.wait())
    return codes
