"""kubecoord_testkit.servers.managed: readiness waits that fail fast and a context manager that
cleans up a half-done start."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kubecoord_testkit.servers.managed import ManagedServers, free_port, wait_ready


class Failed(Exception):
    pass


def test_a_free_port_can_be_bound() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))


def test_ready_after_a_few_not_ready_answers() -> None:
    answers: Iterator[OSError | bool] = iter([OSError("refused"), False, True])

    def ready() -> bool:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    wait_ready(ready, what="server", timeout=30, gone=lambda: None, fail=Failed, interval=0.01)


def test_a_dead_process_fails_at_once_not_at_the_deadline() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    started = time.monotonic()
    with pytest.raises(Failed, match="server: exited with 3"):
        wait_ready(lambda: False, what="server", timeout=600, interval=0.01, fail=Failed,
                   gone=lambda: None if process.poll() is None else f"exited with {process.returncode}")
    assert time.monotonic() - started < 300  # far below the 600 s deadline, whatever the load


def test_not_ready_in_time_fails() -> None:
    with pytest.raises(Failed, match="server not ready within 0 s"):
        wait_ready(lambda: False, what="server", timeout=0.05, gone=lambda: None, fail=Failed, interval=0.01)


class Servers(ManagedServers):
    def __init__(self, *, fail: bool) -> None:
        self.fail = fail
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")
        if self.fail:
            raise Failed("the second server did not come up")

    def stop(self) -> None:
        self.calls.append("stop")


def test_a_failed_start_stops_what_was_started() -> None:
    servers = Servers(fail=True)
    with pytest.raises(Failed), servers:
        pass
    assert servers.calls == ["start", "stop"]


def test_leaving_the_block_stops() -> None:
    with Servers(fail=False) as servers:
        assert servers.calls == ["start"]
    assert servers.calls == ["start", "stop"]
