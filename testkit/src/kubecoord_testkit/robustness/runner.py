"""One robustness run: a backend, its clients' traffic under a seeded schedule of faults, the
merged history, Porcupine's verdict and the figures.

Output folder: ``records/`` (one file per client incarnation), ``own/`` (kubecoord's own
event log of each KV client incarnation: the versions its deletes removed), ``stderr/`` (the client
processes'), ``faults.jsonl``, ``history.json`` (what the checker read), ``porcupine/``
(only on a violation: the history again, Porcupine's HTML visualisations), ``events/`` (the
history as a coordination event log, for ``kubecoord analyze``: robustness.eventlog),
``result.json``.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubecoord_testkit import processes
from kubecoord_testkit.robustness import eventlog, recording
from kubecoord_testkit.robustness.backends import (
    BACKENDS,
    CLIENT_KILL,
    CUT,
    DELAY,
    DROP,
    ETCD_RESTART,
    HOLD,
    SERVER_RESTART,
    Backend,
)
from kubecoord_testkit.robustness.checker import Verdict, check_history

ROLES = ("kv", "lock", "semaphore")


@dataclass
class Plan:
    backend: str
    duration: float = 20.0
    """Seconds of traffic (faults run during it)."""
    kv_clients: int = 3
    lock_clients: int = 2
    semaphore_clients: int = 3
    faults: tuple[str, ...] | None = None
    """Kinds to inject (None: every kind the backend can suffer). The first round injects
    every kind once, in a seeded order, even past ``duration``; then kinds at random."""
    fault_every: float = 2.5
    """Mean seconds between the end of one fault and the start of the next."""
    seed: int = 1
    checker_timeout: float = 120.0


@dataclass
class Result:
    backend: str
    figures: dict[str, Any]
    faults: list[dict[str, Any]]
    verdict: Verdict = field(repr=False)
    folder: Path

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    def summary(self) -> str:
        f = self.figures
        return (f"{self.backend}: {f['operations']} operations ({f['kv_operations']} KV, of them "
                f"{f['fenced_writes']} fenced writes, {f['fenced_refused']} refused as fenced; {f['holds']} holds), "
                f"{f['pending']} pending, {f['faults']} faults, checker {f['checker_seconds']:.3f} s: "
                + ("linearizable" if self.ok else f"NOT LINEARIZABLE (exit {self.verdict.status}); see {self.folder}"))


class _Client:
    """One incarnation of a client slot: a process, or a thread with its own coordinator."""

    def __init__(self, name: str, role: str) -> None:
        self.name = name
        self.role = role
        self.process: subprocess.Popen[bytes] | None = None
        self.thread: threading.Thread | None = None
        self.coord: Any = None
        self.stop = threading.Event()
        self.recorder: recording.Recorder | None = None


class Run:
    def __init__(self, plan: Plan, backend: Backend, out: Path) -> None:
        self.plan = plan
        self.backend = backend
        self.out = out
        self.records = out / "records"
        self.records.mkdir(parents=True, exist_ok=True)
        (out / "stderr").mkdir(exist_ok=True)
        self.own = out / "own"
        self.own.mkdir(exist_ok=True)
        self.rng = random.Random(plan.seed)
        self.slots: dict[str, _Client] = {}
        self.incarnations: dict[str, int] = {}
        self.faults: list[dict[str, Any]] = []
        self.crashed: dict[str, int | str] = {}
        """Clients that ended otherwise than by the run's stop or kill -9: name -> exit status or error."""

    # clients ---------------------------------------------------------------------------------

    def start_clients(self) -> None:
        for role, count in (("kv", self.plan.kv_clients), ("lock", self.plan.lock_clients),
                            ("semaphore", self.plan.semaphore_clients)):
            for index in range(count):
                self._spawn(f"{role}-{index}", role)

    def _spawn(self, slot: str, role: str) -> _Client:
        incarnation = self.incarnations.get(slot, 0) + 1
        self.incarnations[slot] = incarnation
        client = _Client(f"{slot}-{incarnation}", role)
        seed = f"{self.plan.seed}:{client.name}"
        if self.backend.threads:
            import kubecoord
            from kubecoord_testkit.robustness.traffic import run_client

            client.recorder = recording.Recorder(self.records / f"{client.name}.jsonl", client.name)
            client.coord = kubecoord.connect(self.backend.url, history=self._own_log(client), **self.backend.options())
            def traffic() -> None:
                assert client.recorder is not None
                try:
                    run_client(role, client.coord, client.recorder, seed, client.stop)
                except Exception as exc:  # a client's crash is a finding: the run reports it
                    self.crashed[client.name] = f"{type(exc).__name__}: {exc}"

            client.thread = threading.Thread(target=traffic, name=f"robustness-{client.name}", daemon=True)
            client.thread.start()
        else:
            errors = open(self.out / "stderr" / f"{client.name}.txt", "ab")  # noqa: SIM115 - the child holds it
            try:
                client.process = subprocess.Popen(
                    [sys.executable, "-m", "kubecoord_testkit.robustness.traffic", role, "--url", self.backend.url,
                     "--options", json.dumps(self.backend.options()), "--records", str(self.records),
                     "--client", client.name, "--seed", seed,
                     *(["--history", str(path)] if (path := self._own_log(client)) is not None else [])],
                    stdin=subprocess.DEVNULL, stdout=errors, stderr=errors,
                )
            finally:
                errors.close()
        self.slots[slot] = client
        return client

    def _own_log(self, client: _Client) -> Path | None:
        """Where a KV client writes kubecoord's own event log (the versions its deletes removed)."""
        return self.own / f"{client.name}.jsonl" if client.role == "kv" else None

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until every client process has connected (a loaded machine takes seconds to start
        a Python process that imports a client library): faults start on live traffic."""
        deadline = time.monotonic() + timeout
        for client in self.slots.values():
            if client.process is None:
                continue
            output = self.out / "stderr" / f"{client.name}.txt"
            while not self._ready(client):
                if client.process.poll() is not None:
                    raise RuntimeError(f"client {client.name} exited ({client.process.returncode}): "
                                       f"{output.read_text(errors='replace')[-2000:]}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"client {client.name} not connected within {timeout} s")
                time.sleep(0.1)

    def _ready(self, client: _Client) -> bool:
        """The client process said it is ready (its SIGTERM handler is set, it has connected)."""
        output = self.out / "stderr" / f"{client.name}.txt"
        return output.exists() and f"{client.name}: ready" in output.read_text(errors="replace")

    def kill_client(self) -> str:
        slot = self.rng.choice(sorted(self.slots))
        client = self.slots[slot]
        if client.process is not None:
            if client.process.poll() is not None:
                self.crashed[client.name] = client.process.returncode
            client.process.send_signal(signal.SIGKILL)
            client.process.wait()
            what = f"{client.name} killed -9"
        else:
            from kubecoord.testing import crash

            crash(client.coord)
            client.stop.set()
            assert client.thread is not None
            client.thread.join(30)
            what = f"{client.name} crashed (its coordinator stopped as kill -9 would)"
        self._spawn(slot, client.role)
        return what

    def stop_clients(self) -> None:
        running = [client for client in self.slots.values() if client.process is not None]
        starting = {client.name for client in running if not self._ready(client)}
        codes = processes.stop_all([client.process for client in running if client.process is not None], 30.0)
        # One still starting (a loaded machine takes seconds to import a client library) has
        # no SIGTERM handler yet: SIGTERM ends it, and it had done nothing to report.
        self.crashed.update({
            client.name: code for client, code in zip(running, codes, strict=True)
            if code != 0 and not (code == -signal.SIGTERM and client.name in starting)
        })
        for client in self.slots.values():
            client.stop.set()
        for client in self.slots.values():
            if client.thread is not None:
                client.thread.join(30)
                client.coord.close()
            if client.recorder is not None:
                client.recorder.close()

    # faults ----------------------------------------------------------------------------------

    def inject(self, kind: str) -> None:
        proxy = self.backend.proxy
        at = time.monotonic()
        if kind == CLIENT_KILL:
            what = self.kill_client()
        elif kind == SERVER_RESTART:
            what = self.backend.restart_server()
        elif kind == ETCD_RESTART:
            what = self.backend.restart_storage()
        else:
            assert proxy is not None
            seconds = self.rng.uniform(0.5, 2.0)
            if kind == CUT:
                what = f"proxy: {proxy.cut()} connections reset"
            elif kind == DELAY:
                delay = self.rng.uniform(0.05, 0.4)
                proxy.delay(delay)
                time.sleep(seconds)
                proxy.heal()
                what = f"proxy: {delay:.2f} s delay for {seconds:.1f} s"
            elif kind == HOLD:
                proxy.hold()
                time.sleep(seconds)
                proxy.release()
                what = f"proxy: both directions held for {seconds:.1f} s"
            elif kind == DROP:
                proxy.drop()
                time.sleep(seconds)
                proxy.heal()
                what = f"proxy: both directions dropped for {seconds:.1f} s, then dark connections reset"
            else:
                raise ValueError(f"unknown fault {kind!r}")
        fault = {"kind": kind, "at": at, "until": time.monotonic(), "what": what}
        self.faults.append(fault)
        with open(self.out / "faults.jsonl", "a", encoding="utf-8") as log:
            log.write(json.dumps(fault) + "\n")

    def schedule(self) -> None:
        kinds = list(self.plan.faults if self.plan.faults is not None else self.backend.faults)
        unknown = set(kinds) - set(self.backend.faults)
        if unknown:
            raise ValueError(f"backend {self.backend.name} cannot suffer {sorted(unknown)}")
        first = kinds[:]
        self.rng.shuffle(first)
        deadline = time.monotonic() + self.plan.duration
        while kinds:
            pause = self.rng.uniform(0.5, 1.5) * self.plan.fault_every
            if not first and time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
            self.inject(first.pop() if first else self.rng.choice(kinds))
        time.sleep(max(0.0, deadline - time.monotonic()) + self.plan.fault_every)


def run(plan: Plan, out: Path) -> Result:
    """Runs ``plan`` with its output in ``out``; the verdict says whether Porcupine found a linearization."""
    out.mkdir(parents=True, exist_ok=True)
    backend = BACKENDS[plan.backend](out)
    backend.start()
    try:
        tier = Run(plan, backend, out)
        tier.start_clients()
        try:
            tier.wait_ready()
            tier.schedule()
        finally:
            if backend.proxy is not None:
                backend.proxy.heal()
            tier.stop_clients()
    finally:
        backend.stop()
    history = recording.merge(tier.records, tier.faults, own=tier.own)
    verdict = check_history(history, out, timeout=plan.checker_timeout)
    eventlog.write(history, out / "events", plan.backend)
    figures = {
        **recording.figures(history),
        "faults": len(tier.faults),
        "fault_kinds": sorted({fault["kind"] for fault in tier.faults}),
        "checker_seconds": round(verdict.seconds(), 3),
        "client_incarnations": sum(tier.incarnations.values()),
        "client_crashes": dict(tier.crashed),
    }
    result = Result(plan.backend, figures, tier.faults, verdict, out)
    (out / "result.json").write_text(json.dumps(
        {"plan": asdict(plan), "figures": figures, "checker": verdict.report, "status": verdict.status}, indent=2))
    return result
