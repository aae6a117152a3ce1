"""The soak's pool stops every process and, of one that does not exit when asked, keeps
where it hung."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kubecoord_testkit.soak.processes import Worker, WorkerPool

DEAF = """
import faulthandler, signal, time
faulthandler.enable(all_threads=True)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("deaf-1.1: ready", flush=True)
def stuck_in_close():
    time.sleep(60)
stuck_in_close()
"""


def _worker(tmp_path: Path, code: str) -> Worker:
    output = tmp_path / "deaf-1.1.txt"
    with open(output, "wb") as sink:
        process = subprocess.Popen([sys.executable, "-c", code], stdout=sink, stderr=sink)
    worker = Worker("deaf-1", "candidate", 1, "deaf-1.1", process, output=output)
    while not worker.ready():
        assert process.poll() is None, output.read_text()
        time.sleep(0.01)
    return worker


def test_a_process_deaf_to_sigterm_leaves_its_stacks_and_no_exit_code(tmp_path: Path) -> None:
    pool = WorkerPool(url="memory://", options={}, logs=tmp_path, seed=0)
    worker = _worker(tmp_path, DEAF)
    pool.workers[worker.slot] = worker
    assert pool.stop(timeout=0.5) == {"deaf-1.1": None}
    assert worker.process.returncode is not None  # reaped
    stacks = worker.output.read_text() if worker.output else ""
    assert "Fatal Python error: Aborted" in stacks and "in stuck_in_close" in stacks


def test_a_process_that_exits_on_sigterm_gives_its_code(tmp_path: Path) -> None:
    pool = WorkerPool(url="memory://", options={}, logs=tmp_path, seed=0)
    worker = _worker(tmp_path, 'print("deaf-1.1: ready", flush=True)\nimport time\ntime.sleep(60)')
    pool.workers[worker.slot] = worker
    assert pool.stop(timeout=10) == {"deaf-1.1": -15}
