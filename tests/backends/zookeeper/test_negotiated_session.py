"""A server that negotiates the session timeout down: holders' deadlines follow the server.

The client asks for a long session (REQUESTED); the server's maxSessionTimeout is short
(SERVER_MAX), so the session the server keeps — and expires — is SERVER_MAX long. A holder
frozen (SIGSTOP) past SERVER_MAX has lost its znode to the server's expiry and another
process holds; resumed, it must not believe it holds, not even for the moment before
kazoo notices: its deadline comes from the negotiated timeout, not the requested one.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubecoord
from kubecoord_testkit.faults.proxy import ThreadedFaultProxy
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

ROOT = Path(__file__).resolve().parents[3]
REQUESTED = 20.0
SERVER_MAX = 2.0


@pytest.fixture
def capped_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A standalone server whose sessions last SERVER_MAX seconds at most."""
    with ZooKeeperServer.standalone(tmp_path, max_session_timeout=SERVER_MAX) as server:
        yield server


class Holder:
    """tests/backends/zookeeper/holder_process.py in a process of its own, its stdout line by line."""

    def __init__(self, url: str, kind: str, name: str, holder_id: str, logs: Path) -> None:
        self.stderr = logs / f"{holder_id}.stderr"
        with open(self.stderr, "w") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.backends.zookeeper.holder_process", url, kind, name, holder_id,
                 str(REQUESTED)],
                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.strip())

    def expect(self, word: str, timeout: float = 60.0) -> list[float]:
        """The numbers of the next line starting with ``word`` (earlier lines are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                errors = self.stderr.read_text()
                raise AssertionError(f"no {word!r} line within {timeout} s; stderr:\n{errors}") from None
            head, *numbers = line.split()
            if head == word:
                return [float(n) for n in numbers]

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        self.process.wait()


@pytest.mark.parametrize("kind", ["lock", "election"])
def test_a_holder_frozen_past_the_negotiated_session_stops_holding_before_another_holds(
    capped_zookeeper: ZooKeeperServer, tmp_path: Path, kind: str
) -> None:
    chroot = f"negotiated-{uuid.uuid4().hex[:8]}"
    holders: list[Holder] = []
    with ThreadedFaultProxy(("127.0.0.1", capped_zookeeper.servers[0].client_port)) as proxy:
        try:
            first = Holder(f"zookeeper://{proxy.address}/{chroot}", kind, "work", "h1", tmp_path)
            holders.append(first)
            (first_start,) = first.expect("held")
            second_start, first_last_true, first_false = _frozen_until_taken_over(
                first, f"zookeeper://{capped_zookeeper.hosts}/{chroot}", kind, tmp_path, holders, proxy
            )
        finally:
            proxy.heal()
            for holder in holders:
                holder.stop()
    intervals = f"h1 held [{first_start:.3f}, {first_last_true:.3f}], h2 from {second_start:.3f}"
    print(intervals)  # the figures, with -s
    assert first_last_true < second_start, (
        f"two holders for {first_last_true - second_start:.3f} s: {intervals};"
        f" h1 first said not held at {first_false:.3f}"
    )
    assert "negotiated" in first.stderr.read_text(), "no warning that the server shortened the session"


def test_connect_warns_when_the_server_negotiates_the_session_timeout(
    capped_zookeeper: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"zookeeper://{capped_zookeeper.hosts}/negotiated-{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.WARNING, logger="kubecoord.zookeeper"):
        with kubecoord.connect(url, lease_duration=SERVER_MAX):
            pass
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "warned with nothing negotiated"
        with kubecoord.connect(url, lease_duration=REQUESTED):
            pass
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.__dict__["requested"], r.__dict__["negotiated"]) for r in warnings] == [(REQUESTED, SERVER_MAX)]


def test_a_reconnect_that_negotiates_a_shorter_session_shortens_the_leaders_deadline(tmp_path: Path) -> None:
    """The server is restarted with a lower maxSessionTimeout while a leader is connected:
    the leader's session survives (a standalone server keeps sessions across a restart),
    its reconnect is granted SERVER_MAX instead of REQUESTED, and it leads again. The
    server now expires the session SERVER_MAX after it last heard from the leader, whatever
    the first connection had proved: frozen (SIGSTOP) with its traffic held, the leader must
    not believe it leads once another process does."""
    chroot = f"renegotiated-{uuid.uuid4().hex[:8]}"
    holders: list[Holder] = []
    server = ZooKeeperServer.standalone(tmp_path, max_session_timeout=REQUESTED)
    with server, ThreadedFaultProxy(("127.0.0.1", server.servers[0].client_port)) as proxy:
        try:
            first = Holder(f"zookeeper://{proxy.address}/{chroot}", "election", "work", "h1", tmp_path)
            holders.append(first)
            first.expect("held")
            # The restart: the session is kept, the next connect is capped at SERVER_MAX.
            process = server.servers[0]
            process.kill()
            process.config["maxSessionTimeout"] = str(round(SERVER_MAX * 1000))
            server.start()
            # Suspended, then leading again on the same node once reconnected.
            first.expect("ended")
            first.send("again")
            (first_start,) = first.expect("held")
            second_start, first_last_true, first_false = _frozen_until_taken_over(
                first, f"zookeeper://{server.hosts}/{chroot}", "election", tmp_path, holders, proxy
            )
        finally:
            proxy.heal()
            for holder in holders:
                holder.stop()
    intervals = f"h1 held [{first_start:.3f}, {first_last_true:.3f}], h2 from {second_start:.3f}"
    print(intervals)
    assert first_last_true < second_start, (
        f"two leaders for {first_last_true - second_start:.3f} s: {intervals};"
        f" h1 first said not held at {first_false:.3f}"
    )


def _frozen_until_taken_over(
    first: Holder, second_url: str, kind: str, tmp_path: Path, holders: list[Holder], proxy: ThreadedFaultProxy
) -> tuple[float, float, float]:
    """A second holder (h2, at ``second_url``) waits; the first goes quiet, its traffic is held
    and it is frozen (SIGSTOP) until the server has expired its session and h2 holds, then
    resumed. Returns h2's start, h1's last time held and when h1 first said it was not."""
    second = Holder(second_url, kind, "work", "h2", tmp_path)
    holders.append(second)
    second.expect("connected")
    first.send("quiet")
    first.expect("quiet")
    proxy.hold("down")
    first.process.send_signal(signal.SIGSTOP)
    (second_start,) = second.expect("held")  # the server expired the first one's session
    first.process.send_signal(signal.SIGCONT)
    first.send("go")
    first_last_true, first_false = first.expect("ended")
    return second_start, first_last_true, first_false
