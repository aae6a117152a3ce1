"""kubecoord_testkit.processes: every child is reaped, whatever state it is in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from kubecoord_testkit import processes

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
)
EXITS_ON_SIGTERM = "import time; print('ready', flush=True); time.sleep(60)"


def start(code: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    process.stdout.close()  # the child writes nothing more
    return process


def test_a_process_that_stops_on_sigterm_is_reaped_with_its_status() -> None:
    process = start(EXITS_ON_SIGTERM)
    assert processes.stop(process, 10) == -signal.SIGTERM
    assert process.returncode == -signal.SIGTERM


def test_one_that_ignores_sigterm_is_killed_after_the_timeout() -> None:
    process = start(IGNORES_SIGTERM)
    assert processes.stop(process, 0.5) == -signal.SIGKILL


def test_a_stopped_process_is_continued_so_it_can_act_on_the_signal() -> None:
    process = start(EXITS_ON_SIGTERM)
    os.kill(process.pid, signal.SIGSTOP)
    assert processes.stop(process, 10) == -signal.SIGTERM


def test_stop_all_signals_every_process_before_waiting_and_reaps_the_dead_too() -> None:
    stubborn, polite, dead = start(IGNORES_SIGTERM), start(EXITS_ON_SIGTERM), start(EXITS_ON_SIGTERM)
    dead.kill()
    dead.wait()
    codes = processes.stop_all([stubborn, polite, dead], 0.5)
    assert codes == [-signal.SIGKILL, -signal.SIGTERM, -signal.SIGKILL]
