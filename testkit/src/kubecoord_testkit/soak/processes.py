"""The soak's client processes: started, killed -9, paused and resumed by slot.

A slot is a role and a number (``candidate-1``); each incarnation of a slot is a new
process with a new id (``candidate-1.2`` after the first restart) and its own event log,
so a restarted process is never confused with the one that was killed. Every process
is reaped: kill -9 is followed by wait(), and stop() SIGTERMs and waits for all.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Worker:
    slot: str
    role: str
    incarnation: int
    id: str
    process: subprocess.Popen[bytes]
    output: Path | None = None
    paused: bool = False

    def ready(self) -> bool:
        """The worker said "ready": its signal handlers are set (SIGUSR1's default kills)."""
        try:
            return self.output is not None and f"{self.id}: ready" in self.output.read_text(errors="replace")
        except OSError:
            return False


@dataclass
class WorkerSpec:
    role: str
    name: str
    clock_offset: float = 0.0
    clock_jumps: tuple[float, ...] = ()


@dataclass
class WorkerPool:
    url: str
    options: dict[str, Any]
    logs: Path
    seed: int
    env: dict[str, str] | None = None
    workers: dict[str, Worker] = field(default_factory=dict)
    specs: dict[str, WorkerSpec] = field(default_factory=dict)
    exited: list[Worker] = field(default_factory=list)

    def add(self, slot: str, spec: WorkerSpec) -> Worker:
        self.specs[slot] = spec
        return self._spawn(slot, 1)

    def _spawn(self, slot: str, incarnation: int) -> Worker:
        spec = self.specs[slot]
        worker_id = f"{slot}.{incarnation}"
        argv = [
            sys.executable,
            "-m",
            "kubecoord_testkit.soak.worker",
            spec.role,
            "--url",
            self.url,
            "--id",
            worker_id,
            "--name",
            spec.name,
            "--history",
            str(self.logs / f"{worker_id}.jsonl"),
            "--options",
            json.dumps(self.options),
            "--seed",
            str(self.seed),
            # "=" forms: a negative value would otherwise read as an option.
            f"--clock-offset={spec.clock_offset}",
            f"--clock-jumps={','.join(map(str, spec.clock_jumps))}",
        ]
        # Beside the event logs, not among them: the pipeline reads every file of logs/.
        errors = self.logs.parent / "stderr"
        errors.mkdir(exist_ok=True)
        stderr = open(errors / f"{worker_id}.txt", "ab")  # noqa: SIM115 - the child holds it
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                env=self.env,
            )
        finally:
            stderr.close()
        worker = Worker(slot, spec.role, incarnation, worker_id, process, output=errors / f"{worker_id}.txt")
        self.workers[slot] = worker
        return worker

    def by_id(self, worker_id: str) -> Worker | None:
        return next((w for w in self.workers.values() if w.id == worker_id), None)

    def of_role(self, *roles: str) -> list[Worker]:
        return [w for w in self.workers.values() if w.role in roles and w.process.poll() is None]

    def kill(self, worker: Worker) -> None:
        """kill -9 (a stopped process dies too) and reap."""
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()
        self.exited.append(worker)

    def restart(self, slot: str) -> Worker:
        return self._spawn(slot, self.workers[slot].incarnation + 1)

    def pause(self, worker: Worker) -> None:
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(signal.SIGSTOP)
        worker.paused = True

    def resume(self, worker: Worker) -> None:
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(signal.SIGCONT)
        worker.paused = False

    def signal(self, worker: Worker, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> dict[str, int | None]:
        """SIGCONT + SIGTERM every live process, wait; exit codes by id. One still running
        after ``timeout`` gets SIGABRT (the worker's faulthandler writes every thread's stack
        to its stderr), then SIGKILL; its code is None (it did not exit when asked)."""
        for worker in self.workers.values():
            self.resume(worker)
            # One still starting has no SIGTERM handler yet and nothing to clean up.
            self.signal(worker, signal.SIGTERM if worker.ready() else signal.SIGKILL)
        codes: dict[str, int | None] = {}
        for worker in self.workers.values():
            try:
                codes[worker.id] = worker.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(worker, signal.SIGABRT)
                try:
                    worker.process.wait(5)
                except subprocess.TimeoutExpired:
                    worker.process.kill()
                    worker.process.wait()
                codes[worker.id] = None
        return codes
