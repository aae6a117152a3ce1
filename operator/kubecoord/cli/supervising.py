"""The holder's side of CMD's guards: the watchdog process and CMD's own process.

``Watchdog`` starts cli/watchdog.py (a separate interpreter, in a process group of its
own) and talks to it over a pipe: ``confirm(until)`` each time the renew deadline moves,
``stop()`` when the hold ends, ``end()`` once CMD exited. ``start_command`` starts CMD in
a process group of its own, bound to this process by the kernel's parent-death signal
(Linux: PR_SET_PDEATHSIG, SIGKILL), and has CMD's process tell the watchdog its group
itself, before exec, so a holder frozen right after the fork cannot leave the watchdog
without it.

Guaranteed (Linux): CMD is SIGKILLed when the thread that started it dies (the holder
process died: kill -9, a crash); the watchdog stops CMD's whole group when the holder
stops confirming before its deadline or dies. Not guaranteed: processes CMD moved out of
its group (setsid, setpgid) or that a frozen or dead host cannot stop; those the fencing
token guards (KUBECOORD_TOKEN).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from types import TracebackType

log = logging.getLogger("kubecoord.cli")

PROGRAM = pathlib.Path(__file__).with_name("watchdog.py")
PR_SET_PDEATHSIG = 1

_prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
"""libc's prctl, resolved in this process: a forked child must not load anything."""


class Watchdog:
    """The watchdog process of one hold; a context manager that closes the pipe and reaps it."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(PROGRAM), repr(grace)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, process_group=0,
        )
        assert self._process.stdin is not None
        self._pipe = self._process.stdin
        self.fd = self._pipe.fileno()
        fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._sent: float | None = None
        self._broken = False

    def alive(self) -> bool:
        return not self._broken and self._process.poll() is None

    def confirm(self, until: float) -> None:
        """The hold lasts until ``until`` (time.monotonic()); sent when it changed."""
        if until != self._sent:
            self._sent = until
            self._write(f"hold {until!r}\n")

    def stop(self) -> None:
        self._write("stop\n")

    def end(self) -> None:
        self._write("end\n")

    def _write(self, line: str) -> None:
        try:
            os.write(self.fd, line.encode("ascii"))
        except BlockingIOError:
            pass  # a full pipe: the watchdog is not reading (frozen); its deadline stands
        except OSError as exc:  # EPIPE: it is gone
            self._broken = True
            log.error("the watchdog is gone", extra={"error": str(exc)})

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._pipe.close()
        try:
            self._process.wait(self.grace + 5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _tethered(report_fd: int) -> Callable[[], None]:
    """The function run in CMD's process between fork and exec (it is already the leader
    of its own group): arm the parent-death signal, check the parent did not die before it
    was armed, tell the watchdog the group. Only system calls: no import, no lock."""
    parent = os.getpid()
    prctl = _prctl
    kill = int(signal.SIGKILL)

    def setup() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), kill)  # the parent died before the signal was armed
        os.write(report_fd, b"group %d\n" % os.getpid())

    return setup


def start_command(command: list[str], env: Mapping[str, str], watchdog: Watchdog) -> subprocess.Popen[bytes]:
    """CMD in a process group of its own (its group id is its pid), dying with this thread.
    The calling thread must live as long as CMD: the kernel sends the parent-death signal
    when the thread that forked the child ends."""
    return subprocess.Popen(command, env=dict(env), process_group=0, preexec_fn=_tethered(watchdog.fd))


def exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether CMD exited, without reaping it: its pid, and so its group id, stays reserved
    until process.wait(), so signalling the group meanwhile cannot reach a stranger."""
    if process.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """``signum`` to CMD's process group; nothing when it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
