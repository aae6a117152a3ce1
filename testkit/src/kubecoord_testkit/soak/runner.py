"""Running a soak: servers, workers, the fault schedule, then a clean stop.

Faults run one after another, each healed before the next (the schedule leaves time to
recover between them); every fault is written to ``faults.jsonl`` in the output folder
with what it hit, so a violation can be traced to the fault that preceded it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubecoord
from kubecoord.api import Coordinator
from kubecoord.errors import CoordinationError
from kubecoord_testkit.soak import schedule as kinds
from kubecoord_testkit.soak.backends import BACKENDS, SoakBackend
from kubecoord_testkit.soak.processes import Worker, WorkerPool, WorkerSpec
from kubecoord_testkit.soak.schedule import Fault, make_schedule

log = logging.getLogger("kubecoord_testkit.soak")

CLOCK_OFFSET = "clock_offset"


@dataclass
class SoakConfig:
    backend: str
    duration: float
    seed: int
    out: Path
    candidates: int = 3
    members: int = 3
    writers: int = 3
    lockers: int = 2
    clock_offset: float = 0.6
    """The skewed process's starting offset; its jumps stay within +-clock_offset * 4/3."""
    kinds: tuple[str, ...] | None = None
    """Fault kinds to schedule (default: every kind the backend supports); kinds the
    backend does not support are left out."""
    skip_kinds: tuple[str, ...] = ()


@dataclass
class SoakRun:
    config: SoakConfig
    faults: list[dict[str, Any]] = field(default_factory=list)
    injected: Counter[str] = field(default_factory=Counter)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    processes: int = 0
    restarts: int = 0
    seconds: float = 0.0
    skewed: str = ""
    kinds: tuple[str, ...] = ()


def all_kinds(backend: SoakBackend) -> tuple[str, ...]:
    return (*kinds.COMMON_KINDS, *backend.extra_kinds)


def run(config: SoakConfig, *, say: Any = print) -> SoakRun:
    config.out.mkdir(parents=True, exist_ok=True)
    logs = config.out / "logs"
    logs.mkdir(exist_ok=True)
    backend = BACKENDS[config.backend](config.out / "servers", config.seed)
    # Names carry the backend: one pipeline run judges several soaks' logs together.
    election_name, group_name, store_name = (f"soak-{config.backend}-{what}" for what in ("leader", "group", "kv"))
    backend.election, backend.group, backend.store = election_name, group_name, store_name
    backend.logs = logs
    result = SoakRun(config)
    say(f"starting the {backend.name} servers")
    try:
        backend.start()
    except BaseException:
        with contextlib.suppress(Exception):  # stop what did start; the start error is the one to see
            backend.stop()
        raise
    pool = WorkerPool(url=backend.url, options=backend.options(), logs=logs, seed=config.seed)
    observer: Coordinator | None = None
    try:
        offset = config.clock_offset
        for index in range(1, config.candidates + 1):
            skewed = index == 2
            spec = WorkerSpec(
                "candidate",
                election_name,
                clock_offset=offset if skewed else 0.0,
                clock_jumps=(-offset, offset * 4 / 3, offset / 2) if skewed else (),
            )
            pool.add(f"candidate-{index}", spec)
        result.skewed = "candidate-2" if config.candidates >= 2 else ""
        if result.skewed and offset:
            result.injected[CLOCK_OFFSET] += 1  # for the whole run, on top of the scheduled jumps
        for index in range(1, config.members + 1):
            pool.add(f"member-{index}", WorkerSpec("member", group_name))
        for index in range(1, config.writers + 1):
            pool.add(f"writer-{index}", WorkerSpec("writer", store_name))
        for index in range(1, config.lockers + 1):
            pool.add(f"locker-{index}", WorkerSpec("locker", f"soak-{config.backend}-lock"))
        observer = kubecoord.connect(backend.direct_url, **backend.direct_options())
        election = observer.leader_election(election_name)
        say(f"{len(pool.workers)} client processes started; waiting for a first leader")
        _wait_for_leader(election, 300)  # a loaded machine starts nine clients slowly
        chosen = tuple(
            kind
            for kind in all_kinds(backend)
            if (config.kinds is None or kind in config.kinds) and kind not in config.skip_kinds
        )
        if not chosen:
            raise ValueError(f"no fault kind left for {config.backend} (supported: {', '.join(all_kinds(backend))})")
        result.kinds = chosen
        plan = make_schedule(config.seed, config.duration, chosen, lease=backend.lease)
        say(f"{len(plan)} faults scheduled over {plan[-1].at + plan[-1].duration:.0f} s (seed {config.seed})")
        started = time.monotonic()
        with open(config.out / "faults.jsonl", "w") as record:
            for fault in plan:
                wait = started + fault.at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                began, offset_s = time.time(), time.monotonic() - started
                try:
                    what = _inject(fault, backend, pool, election, random.Random(fault.pick))
                except Exception as exc:  # a fault that could not be injected is reported, not hidden
                    what = f"FAILED to inject: {type(exc).__name__}: {exc}"
                    log.warning("fault not injected", extra={"kind": fault.kind, "error": str(exc)})
                else:
                    result.injected[fault.kind] += 1
                entry = {
                    "at": round(offset_s, 2),
                    "took": round(time.monotonic() - started - offset_s, 2),
                    "ts": began,
                    "kind": fault.kind,
                    "duration": fault.duration,
                    "what": what,
                }
                repaired = backend.after_fault()
                if repaired:
                    entry["after"] = repaired
                result.faults.append(entry)
                record.write(json.dumps(entry) + "\n")
                record.flush()
                say(f"  {entry['at']:7.1f} s  {fault.kind:<28} {what}")
        for proxy in backend.proxies:
            proxy.heal()
        time.sleep(2 * backend.lease)  # let the last fault's consequences show in the logs
        result.seconds = time.monotonic() - started
    finally:
        for worker in pool.workers.values():
            pool.resume(worker)
        result.exit_codes = pool.stop()
        for worker in pool.exited:
            result.exit_codes.setdefault(worker.id, worker.process.returncode)
        result.processes = len(result.exit_codes)
        result.restarts = result.processes - len(pool.specs)
        if observer is not None:
            observer.close()
        backend.close_clients()
        backend.stop()
    return result


def _wait_for_leader(election: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if election.get_leader() is not None:
                return
        except CoordinationError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"no leader within {timeout:.0f} s of starting the clients")


def _leader(election: Any, pool: WorkerPool) -> Worker | None:
    try:
        current = election.get_leader()
    except CoordinationError:
        return None
    worker = pool.by_id(current.id) if current else None
    return worker if worker is not None and worker.process.poll() is None else None


def _inject(fault: Fault, backend: SoakBackend, pool: WorkerPool, election: Any, rng: random.Random) -> str:
    kind = fault.kind
    if kind in (kinds.KILL_LEADER, kinds.KILL_MEMBER):
        target = _leader(election, pool) if kind == kinds.KILL_LEADER else None
        note = ""
        if target is None:
            roles = ("candidate",) if kind == kinds.KILL_LEADER else ("member", "writer", "locker")
            candidates = pool.of_role(*roles)
            if not candidates:
                return "nothing (no live process)"
            target = rng.choice(candidates)
            note = " (no leader seen: a candidate)" if kind == kinds.KILL_LEADER else ""
        pool.kill(target)
        replacement = pool.restart(target.slot)
        return f"kill -9 {target.id}{note}; {replacement.id} started"
    if kind == kinds.PAUSE:
        target = _leader(election, pool) if fault.pick % 2 == 0 else None
        target = target or rng.choice(pool.of_role("candidate", "member", "writer", "locker"))
        pool.pause(target)
        time.sleep(fault.duration)
        pool.resume(target)
        return f"SIGSTOP {target.id} for {fault.duration:.1f} s (lease {backend.lease:g} s), then SIGCONT"
    if kind == kinds.CLOCK_JUMP:
        skewed = [w for w in pool.workers.values() if w.slot == "candidate-2" and w.process.poll() is None]
        if not skewed:
            return "nothing (no skewed process)"
        if not skewed[0].ready():
            return f"nothing ({skewed[0].id} is still starting)"
        pool.signal(skewed[0], signal.SIGUSR1)
        return f"stepped the wall clock of {skewed[0].id} (SIGUSR1)"
    if kind in (kinds.DELAY, kinds.DROP, kinds.HOLD, kinds.CUT):
        return _network(fault, backend, rng)
    return backend.inject(kind, fault.pick)


def _network(fault: Fault, backend: SoakBackend, rng: random.Random) -> str:
    proxies = backend.proxies
    # With several servers (ZooKeeper), half the time only one is cut off: clients move over.
    chosen = proxies if len(proxies) == 1 or fault.pick % 2 == 0 else [rng.choice(proxies)]
    where = "every server" if len(chosen) == len(proxies) else f"server {proxies.index(chosen[0]) + 1}"
    if fault.kind == kinds.CUT:
        cut = sum(proxy.cut() for proxy in chosen)
        return f"reset {cut} connection(s) to {where}"
    if fault.kind == kinds.DELAY:
        latency = round(rng.uniform(0.3, 1.2), 2)
        for proxy in chosen:
            proxy.delay(latency)
        what = f"{latency} s latency each way to {where}"
    elif fault.kind == kinds.DROP:
        for proxy in chosen:
            proxy.drop()
        what = f"blackholed {where}"
    else:
        for proxy in chosen:
            proxy.hold()
        what = f"held all traffic to {where}"
    time.sleep(fault.duration)
    for proxy in chosen:
        proxy.heal()
    return f"{what} for {fault.duration:.1f} s"
