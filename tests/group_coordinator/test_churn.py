"""Members join, leave and are killed (-9, or crash() in-process) in a loop, on every
backend; the reports show no unit held twice, generations strictly increasing, and every
live member working (ensure_generation passing) on each assignment the loop waits for.

One member per process on zookeeper and kubernetes (the real kube-apiserver where
../shared/k8s has it, else the API emulator); threads and kubecoord.testing.crash() on
memory, which lives in one process.
"""

from __future__ import annotations

import pathlib
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kubecoord
from kubecoord.testing import ManualClock, crash
from kubecoord_testkit.servers.kubernetes import BinariesNotFound, find_binaries

from ..helpers import eventually
from .checks import holders, stray_work, violations
from .members import Group, Member, ProcessMember
from .worker import Worker

UNITS = [f"p{i}" for i in range(24)]
SESSION = 1.5


class ThreadMember:
    def __init__(self, group: Group, name: str, url: str, options: dict[str, Any], assignors: list[str]) -> None:
        self.name = name
        self.group = group
        self.coordinator = kubecoord.connect(url, **options)
        self.worker = Worker(self.coordinator, group.name, name, UNITS, group.report, assignors=assignors,
                             session_timeout=SESSION)
        self.worker.start()

    def kill(self) -> None:
        self.worker.halt()
        self.group.killed[self.name] = time.time()
        crash(self.coordinator)

    def leave(self) -> None:
        self.worker.leave()
        self.coordinator.close()


Spawn = Callable[[Group, str], Member]


@pytest.fixture
def spawners(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path
) -> Iterator[Callable[[str, list[str]], Spawn]]:
    started: list[Member] = []

    def make(backend: str, assignors: list[str]) -> Spawn:
        if backend == "memory":
            url = f"memory://churn-{uuid.uuid4().hex[:8]}"
            clock = ManualClock()

            def spawn_thread(group: Group, name: str) -> Member:
                member = ThreadMember(group, name, url, {"lease_duration": SESSION, "clock": clock}, assignors)
                started.append(member)
                return member

            # Expiry on the manual clock follows wall time, so crashed sessions expire.
            ticker = threading.Thread(target=_tick, args=(clock, stop), daemon=True)
            ticker.start()
            return spawn_thread
        config = {"units": UNITS, "assignors": assignors, "session": SESSION,
                  **_connection(request, backend)}

        def spawn_process(group: Group, name: str) -> Member:
            member = ProcessMember(group, name, config)
            started.append(member)
            return member

        return spawn_process

    stop = threading.Event()
    yield make
    stop.set()
    for member in started:
        if isinstance(member, ProcessMember):
            member.kill()


def _tick(clock: ManualClock, stop: threading.Event) -> None:
    while not stop.wait(0.05):
        clock.advance(0.05)


def _connection(request: pytest.FixtureRequest, backend: str) -> dict[str, Any]:
    if backend == "zookeeper":
        server = request.getfixturevalue("zookeeper_server")
        return {"url": f"zookeeper://{server.hosts}/churn-{uuid.uuid4().hex[:8]}", "options": {"lease_duration": 2.0}}
    timings = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
    try:  # Kubernetes: the real kube-apiserver where its binaries are, else the API emulator
        find_binaries()
    except BinariesNotFound:
        kubeconfig = request.getfixturevalue("kubeconfig_path")
        namespace = "default"
    else:
        kubeconfig = request.getfixturevalue("real_kubeconfig")
        namespace = request.getfixturevalue("real_contract_namespace")
    return {"url": f"kubernetes://{namespace}", "options": {"kubeconfig": str(kubeconfig), **timings}}


# Eager (sticky) members churn on memory here and, led by the operator, on the real
# kube-apiserver and ZooKeeper in tests/operator/test_group_assignment_real.py.
CASES = [
    ("memory", ["sticky"]),
    ("memory", ["cooperative-sticky"]),
    ("zookeeper", ["cooperative-sticky"]),
    ("kubernetes", ["cooperative-sticky"]),
]
# Each kill costs the backend's expiry plus the session fence; processes also start
# slowly under load, so the process backends run a shorter loop (the group-coordinator
# budget of make test is 2 minutes).
ACTIONS = {
    "memory": ["kill", "leave", "join", "burst"],
    "process": ["kill", "leave", "join"],
}


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(("backend", "assignors"), CASES, ids=[f"{b}-{a[0]}" for b, a in CASES])
def test_join_leave_kill_loop(
    backend: str, assignors: list[str], spawners: Callable[[str, list[str]], Spawn]
) -> None:
    spawn = spawners(backend, assignors)
    group = Group(UNITS)
    rng = random.Random(11)
    settle = 60.0
    names = (f"m{i}" for i in range(100))
    for _ in range(3):
        name = next(names)
        group.alive[name] = spawn(group, name)
    eventually(group.working, settle)
    for action in ACTIONS["memory" if backend == "memory" else "process"]:
        victim = rng.choice(sorted(group.alive))
        if action in ("kill", "burst"):
            group.alive.pop(victim).kill()
        elif action == "leave":
            group.alive.pop(victim).leave()
        for _ in range({"kill": 1, "leave": 0, "join": 1, "burst": 2}[action]):
            name = next(names)
            group.alive[name] = spawn(group, name)
        eventually(group.working, settle)
        assert violations(group.snapshot(), group.killed) == []
    reports = group.snapshot()
    assert violations(reports, group.killed) == []
    errors: list[BaseException] = []

    def leave(member: Member) -> None:
        try:
            member.leave()
        except BaseException as exc:  # a leave that hangs or fails fails the test
            errors.append(exc)

    leaving = [threading.Thread(target=leave, args=(m,)) for m in group.alive.values()]  # all at once
    for thread in leaving:
        thread.start()
    for thread in leaving:
        thread.join()
    assert errors == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_paused_member_is_fenced_before_its_units_move(spawners: Callable[[str, list[str]], Spawn]) -> None:
    """SIGSTOP a member past its session: the others take its units; once it runs
    again its ensure_generation() refuses work before it learns anything (ZooKeeper:
    reads go to the server, and its session is gone)."""
    spawn = spawners("zookeeper", ["sticky"])
    group = Group(UNITS)
    for name in ("a", "b", "c"):
        group.alive[name] = spawn(group, name)
    eventually(group.settled, 60)
    paused = group.alive["b"]
    assert isinstance(paused, ProcessMember)
    held = {u for u, m in holders(group.snapshot(), {}).items() if m == "b"}
    paused.process.send_signal(signal.SIGSTOP)
    try:
        eventually(lambda: not held & {u for u, m in holders(group.snapshot(), {}).items() if m == "b"}, 60)
    finally:
        resumed_at = time.time()
        paused.process.send_signal(signal.SIGCONT)
    def b_noticed() -> bool:
        return any(
            line["member"] == "b" and line.get("t", 0) > resumed_at and line["e"] in ("fenced", "revoked")
            for line in group.snapshot()
        )

    eventually(b_noticed, 30)
    reports = group.snapshot()
    assert stray_work(reports, "b", {}) == []
    del group.alive["b"]
    group.gone.append(paused)
