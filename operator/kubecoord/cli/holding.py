"""Running a command while holding a lock or leading an election (``kubecoord lock``/``elect``).

The command (CMD) is a child process started when the hold begins, with KUBECOORD_TOKEN
(the fencing token or epoch), KUBECOORD_NAME (the lock's or election's name: with the
token, the fence of its writes) and KUBECOORD_HOLDER (the holder id) in its environment. It
runs only while the hold lasts, whatever happens to this process:

- the hold ends (lost, or this process got SIGTERM/SIGINT/SIGHUP): CMD's process group gets
  SIGTERM, then SIGKILL after ``grace`` seconds; kubecoord exits with CMD's status (128 + N
  when a signal N ended it, as a shell reports it), etcdctl's behaviour;
- this process dies (kill -9, a crash): the kernel SIGKILLs CMD (the parent-death signal)
  and the watchdog stops the rest of CMD's group;
- this process is frozen (SIGSTOP) or hung: the watchdog, a separate process told the renew
  deadline each time it moves, stops CMD's group when the deadline passes — strictly
  before anybody else can acquire.

CMD exits: what it left running in its process group is killed (SIGKILL) before the hold
is released. cli/supervising.py starts the guards; cli/watchdog.py is the watchdog.
``HeldCommand`` is what ``lock`` and ``elect`` share: the backend opened with --ttl, SIGHUP
handling, the Child, and how a backend error at the end of the hold is judged.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from kubecoord.cli.connection import open_coordinator, resolve_url
from kubecoord.cli.exits import UsageError
from kubecoord.cli.supervising import Watchdog, exited, signal_group, start_command
from kubecoord.errors import CoordinationError
from kubecoord.timings import DEFAULT_LEASE_DURATION, DEFAULT_SESSION_LEASE

if TYPE_CHECKING:
    from kubecoord.api import Coordinator

log = logging.getLogger("kubecoord.cli")

POLL = 0.05
BACKSTOP = 1.0
"""After the end of a hold, SIGKILL comes from here this long after the watchdog's would
have come (grace seconds after its SIGTERM), in case the watchdog did not send it."""


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id", help="the holder id (default host-pid-random; must be unique among the users)")
    parser.add_argument("--data", default="", help="data shown to others with the holder (default empty)")
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="after SIGTERM, how long the command may take before SIGKILL (default %(default)g)",
    )
    parser.add_argument(
        "--ttl",
        type=float,
        metavar="SECONDS",
        help="how long the hold outlives a holder that stopped renewing: the Lease duration (kubernetes://; "
        "renew deadline and retry period in client-go's 15:10:2 proportion), the session timeout "
        f"(zookeeper://, cassandra://), the lease's TTL (etcd://; whole seconds, at least 2, rounded up; "
        f"the backend derives renew deadline and retry period); default the backend's ({DEFAULT_LEASE_DURATION:g} s, "
        f"{DEFAULT_SESSION_LEASE:g} s); a LeaderElection resource's timings win over it",
    )
    parser.set_defaults(cmd=[])  # the command after --: kubecoord.cli's main() splits it off
    parser.epilog = "the command to run follows --, last: ... -- CMD ARGS..."


def command_of(args: argparse.Namespace) -> list[str]:
    command = list(args.cmd)
    if not command:
        raise UsageError("give the command to run after --, e.g. kubecoord lock NAME -- ./job.sh")
    return command


def ttl_options(args: argparse.Namespace) -> dict[str, Any]:
    """The connect() options --ttl stands for on the command's backend."""
    ttl = args.ttl
    if ttl is None:
        return {}
    if not ttl > 0:
        raise UsageError(f"--ttl must be positive, not {ttl:g}")
    scheme = resolve_url(args).scheme
    if scheme == "zookeeper":
        return {"lease_duration": ttl}  # a session has no renew deadline of its own
    if scheme in ("cassandra", "etcd"):
        # Row and lease TTLs are whole seconds (at least 2); the backend derives the rest.
        return {"lease_duration": max(2, math.ceil(ttl))}
    return {"lease_duration": ttl, "renew_deadline": ttl * 2 / 3, "retry_period": ttl * 2 / 15}


@contextlib.contextmanager
def stopping_on_hangup(stop: threading.Event) -> Iterator[None]:
    """While inside: SIGHUP (the terminal closed) sets ``stop``, as the runners make
    SIGTERM/SIGINT do, so the hold ends in order. Main thread only (elsewhere: nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGHUP, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def after_cmd_ran(child: Child | None, error: CoordinationError) -> None:
    """A backend error while a hold ends (resigning, releasing, closing the connection):
    raised when CMD never ran; once it ran, CMD's status is the command's result and the
    error is logged — the hold ends when its lease or session expires at the latest (after
    a loss there is nothing left to release)."""
    if child is None or child.status is None:
        raise error
    log.warning("could not end the hold on the backend; it ends when its lease or session expires",
                extra={"hold": child.name, "holder": child.holder, "error": f"{type(error).__name__}: {error}"})


class HeldCommand:
    """CMD (after ``--``) run under one hold that ``run(hold)`` takes.

    The command line is checked when it is made (UsageError before any request). ``run``
    opens the backend with the --ttl options and, while SIGHUP sets ``stop``, calls
    ``hold(coordinator)``, which takes the hold and runs ``child(...)``'s Child under it with
    ``stop``; a backend error while the hold ends is judged by after_cmd_ran."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self.command = command_of(args)
        self.stop = threading.Event()
        self._child: Child | None = None

    def child(self, holder: str, held_until: Callable[[], float | None]) -> Child:
        """The Child of this hold (``holder``'s; ``held_until``: its renew deadline)."""
        self._child = Child(self.command, self._args.grace, self._args.name, holder, held_until)
        return self._child

    def run(self, hold: Callable[[Coordinator], None]) -> int | None:
        """CMD's status once it ran; None when it never ran."""
        try:
            with open_coordinator(self._args, **ttl_options(self._args)) as coord, stopping_on_hangup(self.stop):
                hold(coord)
        except CoordinationError as error:
            after_cmd_ran(self._child, error)
        return None if self._child is None else self._child.status


class Child:
    """The command for one hold; ``status`` once it ended (None: never started).

    ``held_until`` answers the hold's renew deadline (Lock.held_until,
    LeaderElection.leading_until; None once it ended)."""

    def __init__(self, command: list[str], grace: float, name: str, holder: str,
                 held_until: Callable[[], float | None]) -> None:
        self.command = command
        self.grace = grace
        self.name = name
        self.holder = holder
        self.held_until = held_until
        self.status: int | None = None

    def run(self, token: int, stop: threading.Event) -> int | None:
        """Run CMD for the hold under ``token`` until it exits; ``stop`` ends the hold.
        Called on the runner's worker thread, which lives until CMD is reaped (the
        parent-death signal is bound to it)."""
        env = {**os.environ, "KUBECOORD_TOKEN": str(token), "KUBECOORD_NAME": self.name,
               "KUBECOORD_HOLDER": self.holder}
        until = self.held_until()
        if until is None:
            return None  # the hold ended before CMD could start
        with Watchdog(self.grace) as watchdog:
            watchdog.confirm(until)
            try:
                process = start_command(self.command, env, watchdog)
            except (OSError, subprocess.SubprocessError) as exc:
                watchdog.end()
                raise UsageError(f"cannot run {self.command[0]!r}: {exc}") from exc
            code = self._follow(process, watchdog, stop)
        self.status = 128 - code if code < 0 else code
        return self.status

    def _follow(self, process: subprocess.Popen[bytes], watchdog: Watchdog, stop: threading.Event) -> int:
        """Confirm the hold to the watchdog until CMD exits; on the end of the hold, have
        the watchdog stop CMD (or stop it here when the watchdog is gone)."""
        kill_at: float | None = None
        while not exited(process):
            until = self.held_until()
            if kill_at is None and until is not None:
                watchdog.confirm(until)
            if kill_at is None and (stop.is_set() or until is None or not watchdog.alive()):
                if watchdog.alive():
                    watchdog.stop()  # its SIGTERM, then its SIGKILL after grace
                else:
                    log.error("the watchdog is gone; stopping the command", extra={"holder": self.holder})
                    signal_group(process, signal.SIGTERM)
                kill_at = time.monotonic() + self.grace + BACKSTOP
            if kill_at is not None and time.monotonic() >= kill_at:
                signal_group(process, signal.SIGKILL)
                kill_at = float("inf")
            time.sleep(POLL)
        signal_group(process, signal.SIGKILL)  # what CMD left behind in its group
        watchdog.end()
        return process.wait()
