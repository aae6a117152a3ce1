"""The guards of `kubecoord lock|elect -- CMD`, without a backend: the watchdog process
(kubecoord/cli/watchdog.py, started as the holder starts it: python -I -S, so these tests
also prove it imports nothing but the standard library) and CMD's parent-death signal.

A command here is ``sh -c 'sleep 60 & echo $! > FILE; wait'``: CMD with a child in its
process group, so a test sees the whole group stopped, not only CMD."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from kubecoord.cli.supervising import Watchdog, exited, start_command

from ..helpers import eventually


def _running(pid: int) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


class Command:
    def __init__(self, watchdog: Watchdog, directory: pathlib.Path, script: str = "") -> None:
        self.child_file = directory / "child"
        self.process = start_command(
            ["sh", "-c", f'{script} sleep 60 & echo $! > "{self.child_file}"; wait'], os.environ, watchdog
        )
        eventually(lambda: self.child_file.exists() and self.child_file.read_text().strip() != "", 30)
        self.child = int(self.child_file.read_text())

    def dead(self) -> bool:
        return exited(self.process) and not _running(self.child)

    def kill(self) -> None:
        for pid in (self.process.pid, self.child):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(30)


@pytest.fixture
def commands() -> Iterator[list[Command]]:
    started: list[Command] = []
    yield started
    for command in started:
        command.kill()


def test_a_deadline_passing_unconfirmed_stops_the_group(tmp_path: pathlib.Path, commands: list[Command]) -> None:
    with Watchdog(grace=10) as watchdog:
        watchdog.confirm(time.monotonic() + 1.0)
        commands.append(command := Command(watchdog, tmp_path))
        eventually(command.dead, 30)
        assert command.process.wait(10) == -signal.SIGTERM


def test_a_later_confirmation_moves_the_deadline_and_end_disarms(
    tmp_path: pathlib.Path, commands: list[Command]
) -> None:
    watchdog = Watchdog(grace=10)
    first = time.monotonic() + 1.0
    watchdog.confirm(first)
    commands.append(command := Command(watchdog, tmp_path))
    watchdog.confirm(time.monotonic() + 600)
    eventually(lambda: time.monotonic() > first + 1.0, 10)
    assert not exited(command.process) and _running(command.child)
    watchdog.end()
    watchdog.close()  # the watchdog has exited: nothing can stop the command any more
    assert not exited(command.process) and _running(command.child)


def test_the_holders_end_of_the_pipe_closing_stops_the_group(
    tmp_path: pathlib.Path, commands: list[Command]
) -> None:
    watchdog = Watchdog(grace=10)
    watchdog.confirm(time.monotonic() + 600)
    commands.append(command := Command(watchdog, tmp_path))
    watchdog.close()  # as when the holder dies: the pipe closes before "end"
    eventually(command.dead, 30)


def test_stop_sends_sigterm_then_sigkill_after_the_grace(tmp_path: pathlib.Path, commands: list[Command]) -> None:
    with Watchdog(grace=0.5) as watchdog:
        watchdog.confirm(time.monotonic() + 600)
        commands.append(command := Command(watchdog, tmp_path, script='trap "" TERM;'))  # TERM ignored
        watchdog.stop()
        eventually(command.dead, 30)
        assert command.process.wait(10) == -signal.SIGKILL


def test_cmd_dies_with_the_thread_that_started_it(tmp_path: pathlib.Path, commands: list[Command]) -> None:
    """The parent-death signal, alone: the watchdog stays armed far ahead, yet CMD is
    SIGKILLed when the thread that forked it ends (the kernel binds it to that thread)."""
    with Watchdog(grace=10) as watchdog:
        watchdog.confirm(time.monotonic() + 600)
        started: list[subprocess.Popen[bytes]] = []
        thread = threading.Thread(target=lambda: started.append(start_command(["sleep", "60"], os.environ, watchdog)))
        thread.start()
        thread.join(30)
        assert started
        assert started[0].wait(30) == -signal.SIGKILL
        watchdog.end()
