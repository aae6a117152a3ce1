"""Locks across real processes: 4 racers with kill -9 and SIGSTOP past the lease, on
ZooKeeper and the real kube-apiserver; the `kubecoord lock` and `kubecoord elect` commands.

The safety check, from each process's own view: every critical-section step a racer
printed with held=True lies inside its hold; steps of two different holds (token) never
interleave in time, and tokens increase from hold to hold. The event logs say the same:
lock ``acquired`` events in time order carry strictly increasing tokens.
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.slow

RACER = pathlib.Path(__file__).with_name("racer.py")
LEASE = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.5}


@pytest.fixture(params=["zookeeper", "cassandra", "kubernetes"])
def backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    if request.param == "zookeeper":
        return request.getfixturevalue("zookeeper_url"), {"lease_duration": 2.0}
    if request.param == "cassandra":
        # The rows' TTL (whole seconds, renew deadline (3 - 1) x 0.75 = 1.5 s): the kill and
        # the freeze below both outlast it.
        return request.getfixturevalue("cassandra_url"), {"lease_duration": 3, "poll_period": 0.2}
    kubeconfig = request.getfixturevalue("real_kubeconfig")
    return "kubernetes://default", {"kubeconfig": str(kubeconfig), **LEASE}


class Racer:
    def __init__(self, url: str, name: str, ident: str, out: pathlib.Path, options: dict[str, Any]) -> None:
        self.ident = ident
        self.stdout = out / f"{ident}.jsonl"
        self.history = out / f"{ident}.events.jsonl"
        with self.stdout.open("w") as stdout:
            self.process = subprocess.Popen(
                [sys.executable, str(RACER), url, name, ident, str(self.history), json.dumps(options)],
                stdout=stdout, stderr=(out / f"{ident}.err").open("w"),
            )

    def steps(self) -> list[dict[str, Any]]:
        lines = self.stdout.read_text().splitlines()
        return [step for line in lines if line.endswith("}") for step in [json.loads(line)] if "held" in step]

    def ready(self) -> bool:
        return self.stdout.read_text().startswith('{"t"') and '"ready"' in self.stdout.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def racers(tmp_path: pathlib.Path) -> Iterator[list[Racer]]:
    started: list[Racer] = []
    yield started
    for racer in started:
        racer.stop()


def _holds(racers: list[Racer]) -> list[tuple[float, float, int, str]]:
    """(first, last, token, id) of every hold, from the steps printed with held=True."""
    holds: dict[tuple[str, int], list[float]] = {}
    for racer in racers:
        for step in racer.steps():
            if step["held"]:
                holds.setdefault((step["id"], step["token"]), []).append(step["t"])
    return sorted((min(ts), max(ts), token, ident) for (ident, token), ts in holds.items())


def _wait_holder(racers: list[Racer], timeout: float = 60) -> Racer:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        latest = max(((s["t"], r) for r in racers if r.process.poll() is None for s in r.steps()[-1:] if s["held"]),
                     default=None, key=lambda pair: pair[0])
        if latest is not None and time.time() - latest[0] < 0.1:
            return latest[1]
        time.sleep(0.02)
    for racer in racers:
        if racer.process.poll() is None:
            os.kill(racer.process.pid, signal.SIGUSR1)  # stacks into its .err file
    raise AssertionError("no racer holds the lock")


def test_four_racers_with_kill_and_sigstop_never_overlap(
    backend: tuple[str, dict[str, Any]], racers: list[Racer], tmp_path: pathlib.Path
) -> None:
    url, options = backend
    name = f"race-{uuid.uuid4().hex[:8]}"
    racers.extend(Racer(url, name, f"p{i}", tmp_path, options) for i in range(4))
    deadline = time.monotonic() + 120  # four interpreters importing the clients on a loaded machine
    while not all(racer.ready() for racer in racers):
        assert time.monotonic() < deadline, "the racers did not start"
        time.sleep(0.1)
    time.sleep(2)
    victim = _wait_holder(racers)
    victim.process.kill()  # kill -9 inside a critical section: the lock returns after the lease/session
    victim.process.wait()
    time.sleep(4)
    frozen = _wait_holder([r for r in racers if r is not victim])
    os.kill(frozen.process.pid, signal.SIGSTOP)  # frozen while holding, past the lease
    time.sleep(5)
    os.kill(frozen.process.pid, signal.SIGCONT)
    time.sleep(3)
    for racer in racers:
        racer.stop()

    holds = _holds(racers)
    assert len({h[3] for h in holds}) >= 3, f"too few holders took part: {holds}"
    assert any(h[3] == frozen.ident for h in holds) and any(h[3] != frozen.ident and h[0] > holds[0][0] for h in holds)
    for before, after in itertools.pairwise(holds):
        assert before[1] < after[0], f"holds overlap in their holders' own views: {before} and {after}"
        assert before[2] < after[2], f"tokens did not increase: {before} then {after}"
    # The frozen holder's steps after SIGCONT: it must have seen the hold as ended.
    resumed = [s for s in frozen.steps() if s["t"] > holds[-1][0] - 10]
    assert resumed, "the frozen racer printed nothing"

    acquired = sorted(
        (event["ts"], event["epoch"], event["member"])
        for racer in racers if racer.history.exists()
        for event in map(json.loads, racer.history.read_text().splitlines())
        if event.get("primitive") == "lock" and event["event"] == "acquired"
    )
    tokens = [token for _, token, _ in acquired]
    assert len(tokens) >= len(holds) - 1  # a killed process loses its queued events
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), acquired


def _kubecoord(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kubecoord.cli", *args], text=True, **kwargs)


def test_lock_command_runs_holders_one_at_a_time(zookeeper_url: str, tmp_path: pathlib.Path) -> None:
    log, release = tmp_path / "log", tmp_path / "release"
    # The first holder keeps the lock until the test has read --status (a fixed sleep ended
    # before the status command had started at load 28); the later ones pass straight on.
    script = (f'echo "start $KUBECOORD_TOKEN $KUBECOORD_HOLDER" >> {log}; '
              f'while [ ! -e {release} ]; do sleep 0.05; done; sleep 0.2; echo end >> {log}; exit 3')
    commands = [
        _kubecoord("lock", "job", "--url", zookeeper_url, "--id", f"c{i}", "--", "sh", "-c", script)
        for i in range(3)
    ]
    try:
        deadline = time.monotonic() + 30
        while not (log.exists() and log.read_text()):
            assert time.monotonic() < deadline, "no lock command ran its command"
            time.sleep(0.02)
        status = subprocess.run(
            [sys.executable, "-m", "kubecoord.cli", "lock", "job", "--status", "--url", zookeeper_url, "-o", "json"],
            capture_output=True, text=True, timeout=60, check=True,
        )
        holders = json.loads(status.stdout)["holders"]
        first = log.read_text().split()[2]
        assert len(holders) == 1 and holders[0]["id"] == first, (holders, first)
        release.touch()
        assert [command.wait(60) for command in commands] == [3, 3, 3]  # the command's status
    finally:
        for command in commands:
            if command.poll() is None:
                command.kill()
                command.wait(30)
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["start", "end"] * 3, lines
    tokens = [int(line.split()[1]) for line in lines if line.startswith("start")]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3


def test_lock_command_gives_up_after_wait(zookeeper_url: str, tmp_path: pathlib.Path) -> None:
    holding = tmp_path / "holding"
    holder = _kubecoord("lock", "job", "--url", zookeeper_url, "--", "sh", "-c", f'touch "{holding}"; exec sleep 30')
    try:
        deadline = time.monotonic() + 60
        while not holding.exists():  # a fixed sleep ended before the holder held on a loaded machine
            assert time.monotonic() < deadline and holder.poll() is None, "the holder never ran its command"
            time.sleep(0.05)
        waiter = _kubecoord("lock", "job", "--url", zookeeper_url, "--wait", "0.5", "--", "true")
        assert waiter.wait(30) == 5
    finally:
        holder.terminate()
        assert holder.wait(30) == 128 + signal.SIGTERM  # sleep ended by the SIGTERM passed on


def test_elect_command_passes_sigterm_on_and_exits_with_the_status(zookeeper_url: str, tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "leading"
    script = f'trap "echo stopping >> {marker}; exit 7" TERM; echo "leading $KUBECOORD_TOKEN" >> {marker}; ' \
             "while true; do sleep 0.05; done"
    first = _kubecoord("elect", "svc", "--url", zookeeper_url, "--id", "a", "--", "sh", "-c", script)
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    second = _kubecoord("elect", "svc", "--url", zookeeper_url, "--id", "b", "--", "sh", "-c", script)
    time.sleep(1.5)
    assert marker.read_text().count("leading") == 1  # b waits
    first.send_signal(signal.SIGTERM)
    assert first.wait(30) == 7
    deadline = time.monotonic() + 30
    while marker.read_text().count("leading") < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    lines = marker.read_text().splitlines()
    assert lines[0].startswith("leading") and lines[1] == "stopping" and lines[2].startswith("leading")
    assert int(lines[2].split()[1]) > int(lines[0].split()[1])
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) == 7
