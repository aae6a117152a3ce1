"""`kubecoord lock|elect NAME -- CMD`: CMD never runs without the hold, whatever happens
to the kubecoord process — killed (kill -9), hung up (SIGHUP), frozen (SIGSTOP) past its
lease — on ZooKeeper and the real kube-apiserver, with short leases (--ttl 2).

Each test runs holder A, whose CMD (``sh -c``) runs a stamper (tests/cli/stamper.py:
CMD's child, in CMD's process group), and holder B waiting for the same lock with a
stamper of its own; it strikes A, waits until B's stamper has written, and checks: A's
stamper is dead, and its last stamp comes before B's first (the stampers write every
20 ms on the machine's one monotonic clock: an overlap longer than that shows).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

pytestmark = pytest.mark.slow

STAMPER = pathlib.Path(__file__).with_name("stamper.py")
TTL = "2"
GRACE = "2"


@pytest.fixture(params=["zookeeper", "kubernetes"])
def backend(request: pytest.FixtureRequest) -> list[str]:
    """The connection options of a backend where a lease really expires for other processes."""
    if request.param == "zookeeper":
        return ["--url", request.getfixturevalue("zookeeper_url")]
    return ["--url", "kubernetes://default", "--kubeconfig", str(request.getfixturevalue("real_kubeconfig"))]


class Holder:
    """A `kubecoord KIND NAME -- sh -c 'python stamper.py LOG; ...'` process."""

    def __init__(self, kind: str, name: str, ident: str, connection: list[str], directory: pathlib.Path) -> None:
        self.log = directory / f"{ident}.log"
        self.err = directory / f"{ident}.err"
        script = f'"{sys.executable}" "{STAMPER}" "{self.log}"; echo "exited $?" >> "{self.log}"'
        with self.err.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kubecoord.cli", kind, name, "--id", ident, "--ttl", TTL, "--grace", GRACE,
                 *connection, "--", "sh", "-c", script],
                stderr=err,
            )

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def stamps(self) -> list[float]:
        return [float(line) for line in self.lines() if line[:1].isdigit()]

    def stamper(self) -> tuple[int, int, int] | None:
        """(pid, its parent: CMD, its process group) once the stamper started."""
        for line in self.lines():
            if line.startswith("pid "):
                pid, parent, group = map(int, line.split()[1:4])
                return pid, parent, group
        return None

    def environment(self) -> tuple[int, str]:
        """(KUBECOORD_TOKEN, KUBECOORD_NAME) as CMD's child saw them."""
        line = next(line for line in self.lines() if line.startswith("pid "))
        token, name = line.split()[4:6]
        return int(token), name

    def wait_stamps(self, count: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while len(self.stamps()) < count:
            assert time.monotonic() < deadline, f"{self.log.name}: no stamps; kubecoord said {self.err.read_text()}"
            time.sleep(0.05)

    def cleanup(self) -> None:
        """Kill what is left: kubecoord (resumed first) and, by pid, a stamper it left."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGCONT)
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        found = self.stamper()
        if found is not None:
            for pid in found[:2]:
                if running(pid):
                    os.kill(pid, signal.SIGKILL)


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead: orphans are reaped by nobody here)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.fixture
def holders(tmp_path: pathlib.Path) -> Iterator[Callable[..., Holder]]:
    started: list[Holder] = []

    def start(kind: str, name: str, ident: str, connection: list[str]) -> Holder:
        holder = Holder(kind, name, ident, connection, tmp_path)
        started.append(holder)
        return holder

    yield start
    for holder in started:
        holder.cleanup()


def _strike_and_check(kind: str, connection: list[str], holders: Callable[..., Holder],
                      strike: Callable[[subprocess.Popen[bytes]], None]) -> tuple[Holder, Holder]:
    name = f"guard-{uuid.uuid4().hex[:8]}"
    first = holders(kind, name, "a", connection)
    first.wait_stamps(3)
    second = holders(kind, name, "b", connection)
    strike(first.process)
    second.wait_stamps(3)
    found = first.stamper()
    assert found is not None
    pid, cmd, _ = found
    assert not running(pid), "A's stamper (in CMD's group) still runs while B holds"
    assert not running(cmd), "A's CMD still runs while B holds"
    assert max(first.stamps()) < min(second.stamps()), (
        f"A's command ran on {max(first.stamps()) - min(second.stamps()):.3f} s into B's hold"
    )
    (token_a, name_a), (token_b, name_b) = first.environment(), second.environment()
    assert name_a == name_b == name and token_b > token_a
    return first, second


@pytest.mark.parametrize("kind", ["lock", "elect"])
def test_kill_9_of_kubecoord_stops_cmd_before_another_holder_starts(
    kind: str, zookeeper_url: str, holders: Callable[..., Holder]
) -> None:
    _strike_and_check(kind, ["--url", zookeeper_url], holders, lambda process: process.kill())


@pytest.mark.parametrize("kind", ["lock", "elect"])
def test_sighup_to_kubecoord_stops_cmd_and_hands_over(
    kind: str, zookeeper_url: str, holders: Callable[..., Holder]
) -> None:
    first, _ = _strike_and_check(kind, ["--url", zookeeper_url], holders,
                                 lambda process: process.send_signal(signal.SIGHUP))
    assert first.process.wait(30) == 128 + signal.SIGTERM  # CMD's status: ended by the SIGTERM it was sent


@pytest.mark.parametrize("kind", ["lock", "elect"])
def test_sigstop_of_kubecoord_past_its_lease_the_watchdog_stops_cmd(
    kind: str, backend: list[str], holders: Callable[..., Holder]
) -> None:
    first, _ = _strike_and_check(kind, backend, holders, lambda process: os.kill(process.pid, signal.SIGSTOP))
    os.kill(first.process.pid, signal.SIGCONT)
    # Resumed, it finds its hold lost and its command ended by the watchdog's SIGTERM.
    assert first.process.wait(60) == 128 + signal.SIGTERM, f"kubecoord said {first.err.read_text()}"


def _kubecoord(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kubecoord.cli", *args])


def _wait_file(path: pathlib.Path, process: subprocess.Popen[bytes], timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline and process.poll() is None, f"{path.name} never written"
        time.sleep(0.05)
    return path.read_text()


def _watchdogs_of(pid: int) -> list[int]:
    """The watchdog processes started by ``pid`` (its children running watchdog.py)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and any(arg.endswith(b"watchdog.py") for arg in command):
            found.append(int(entry.name))
    return found


def test_kubecoord_stops_cmd_itself_when_its_watchdog_dies(zookeeper_url: str, tmp_path: pathlib.Path) -> None:
    """A hold nothing outside kubecoord guards any more ends: CMD's group gets SIGTERM."""
    marker = tmp_path / "running"
    holder = _kubecoord("lock", "job", "--url", zookeeper_url, "--grace", GRACE, "--",
                        "sh", "-c", f'echo $$ > "{marker}"; exec sleep 60')
    try:
        _wait_file(marker, holder)
        watchdogs = _watchdogs_of(holder.pid)
        assert len(watchdogs) == 1, watchdogs
        os.kill(watchdogs[0], signal.SIGKILL)
        assert holder.wait(60) == 128 + signal.SIGTERM
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


def test_what_cmd_leaves_in_its_group_is_killed_before_the_release(
    zookeeper_url: str, tmp_path: pathlib.Path
) -> None:
    left = tmp_path / "left"
    holder = _kubecoord("lock", "job", "--url", zookeeper_url, "--",
                        "sh", "-c", f'sleep 60 & echo $! > "{left}"; exit 4')
    try:
        assert holder.wait(60) == 4
        pid = int(_wait_file(left, holder, 10))
        assert not running(pid), "CMD's background child outlived the hold"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)
