"""The watchdog of ``kubecoord lock``/``elect``: stops CMD when its holder cannot.

A process of its own, started by the holder (cli/supervising.py) before CMD starts, in a
process group of its own, so that what freezes or kills the holder — SIGSTOP, SIGKILL, the
terminal's job control — does not reach it. It reads lines from its standard input, a
pipe whose other end only the holder has:

    hold T     the holder holds until T (time.monotonic(), the renew deadline)
    group P    CMD runs as process group P (written by CMD's own process, before exec)
    stop       the holder ends the hold: stop CMD now
    end        CMD exited and nothing of its group is left: exit without signalling

It stops CMD's process group — SIGTERM, then SIGKILL after GRACE seconds unless the group
is gone — at the first of: T (less EARLY, for its own scheduling delay) passes with no
later ``hold`` (the holder is frozen or hung: T is strictly before anybody else can
acquire), the pipe closes before ``end`` (the holder died), ``stop``. Then it exits. Its
clock is time.monotonic(): CLOCK_MONOTONIC, one clock for every process of the machine,
so the holder's deadline means the same here.

Standard library only, run as ``python -I -S watchdog.py GRACE``: no site, no
PYTHONPATH, no kubecoord import — it starts in tens of milliseconds and nothing of the
holder's environment can break it. Not guarded: a watchdog that is itself killed or
frozen (the holder then stops CMD itself when it notices, if it runs); CMD that does not
stop on SIGTERM before the hold would have ended (SIGKILL comes GRACE seconds later).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

POLL = 0.05
EARLY = 0.25
"""The watchdog acts this long before the deadline it was told: on a loaded machine it may
be scheduled late, and on ZooKeeper the deadline is close to the session's end (a frozen
holder's CMD was measured dead 0.16-0.24 s before the next holder's CMD started without
this margin, 0.47-0.50 s with it)."""
"""How often, after SIGTERM, the watchdog checks whether the group is gone."""

IGNORED = (signal.SIGINT, signal.SIGHUP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
"""The terminal's signals: a watchdog is not a job of the terminal (SIGTTOU ignored lets it
write its one line to a terminal that stops background writers)."""


class Watch:
    """What the holder said so far."""

    def __init__(self) -> None:
        self.until: float | None = None
        self.group: int | None = None
        self.ending = ""
        """Why the watch ended: "deadline", "closed", "stop" or "end" (empty: still on)."""
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            word, _, value = line.decode("ascii", "replace").partition(" ")
            if word == "hold":
                self.until = float(value)
            elif word == "group":
                self.group = int(value)
            elif word in ("stop", "end") and not self.ending:
                self.ending = word

    def timeout(self) -> float | None:
        """Seconds until the watchdog acts: EARLY before the deadline (None: not armed yet)."""
        return None if self.until is None else max(0.0, self.until - EARLY - time.monotonic())


def follow(fd: int, watch: Watch) -> None:
    """Read the holder's lines until the watch ends."""
    while not watch.ending:
        timeout = watch.timeout()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            if timeout == 0.0:
                # Past the deadline with nothing unread: every line carries an absolute
                # deadline, so one written before now but read only now still counts.
                watch.ending = "deadline"
                return
            continue  # the deadline came: judged again at the top
        data = os.read(fd, 4096)
        if not data:
            watch.ending = "closed"
            return
        watch.feed(data)


def _signal(group: int, signum: int) -> bool:
    """Signal the group; False when it is gone."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    return True


def _alive(group: int) -> bool:
    """Whether a live process (not a zombie: an orphaned CMD may wait long for its reaper)
    is left in ``group``. Without /proc: whether the group exists."""
    if not _signal(group, 0):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[2]) == group and fields[0] not in (b"Z", b"X"):
            return True
    return False


def stop_group(group: int, grace: float, fd: int | None) -> None:
    """SIGTERM to ``group``, SIGKILL after ``grace`` unless it is gone first or the holder
    says ``end`` meanwhile (read from ``fd`` while it is open)."""
    if not _signal(group, signal.SIGTERM):
        return
    watch = Watch()
    kill_at = time.monotonic() + grace
    while time.monotonic() < kill_at:
        if fd is not None and select.select([fd], [], [], POLL)[0]:
            data = os.read(fd, 4096)
            if not data:
                fd = None
            watch.feed(data)
            if watch.ending == "end":
                return
        elif fd is None:
            time.sleep(POLL)
        if not _alive(group):
            return
    _signal(group, signal.SIGKILL)


def main(argv: list[str]) -> int:
    grace = float(argv[0])
    for signum in IGNORED:
        signal.signal(signum, signal.SIG_IGN)
    fd = sys.stdin.fileno()
    watch = Watch()
    follow(fd, watch)
    if watch.ending == "end" or watch.group is None:
        return 0
    if watch.ending != "stop":
        why = "the holder stopped confirming its hold" if watch.ending == "deadline" else "the holder died"
        print(f"kubecoord watchdog: {why}; stopping the command (process group {watch.group})", file=sys.stderr)
    stop_group(watch.group, grace, None if watch.ending == "closed" else fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
