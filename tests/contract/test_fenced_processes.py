"""Contract: fenced writes between real processes (tests/contract/fenced_writer.py), on
every backend a second process can reach (not memory://, which lives in one process).

- Tokens handed in: a higher token is accepted, an equal one again, a lower one refused
  with nothing written — also from a process started after the others exited (the marks
  live in the store, not in a client).
- A holder frozen (SIGSTOP) past its lease, whose successor acquired the lock and wrote
  with its higher token, is refused when it writes with its old token after SIGCONT.
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ..helpers import eventually
from .harness import Harness, UrlHarness

pytestmark = pytest.mark.slow

WRITER = pathlib.Path(__file__).with_name("fenced_writer.py")


class Writer:
    """One fenced_writer.py process; ask() sends a command and waits for its answer."""

    def __init__(self, harness: UrlHarness, store: str, lock: str, err: pathlib.Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WRITER), harness.url, json.dumps(harness.defaults), store, lock],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err.open("w"), text=True, bufsize=1,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.next(timeout=120) == {"ready": True}  # interpreters importing clients on a loaded machine

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def send(self, **command: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def next(self, timeout: float = 120) -> dict[str, Any]:
        try:
            return json.loads(self._lines.get(timeout=timeout))  # type: ignore[no-any-return]
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s (exit status {self.process.poll()})") from None

    def ask(self, timeout: float = 120, **command: Any) -> dict[str, Any]:
        self.send(**command)
        return self.next(timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            try:
                self.send(op="exit")
                self.process.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


@pytest.fixture
def url_harness(harness: Harness) -> UrlHarness:
    if not isinstance(harness, UrlHarness) or harness.name == "memory":
        pytest.skip("memory:// lives in one process: a second process cannot reach its store")
    return harness


@pytest.fixture
def writers(url_harness: UrlHarness) -> Iterator[list[Writer]]:
    started: list[Writer] = []
    yield started
    for writer in started:
        writer.stop()


def _start(writers: list[Writer], harness: UrlHarness, name: str, tmp_path: pathlib.Path) -> Writer:
    writer = Writer(harness, name, name, tmp_path / f"writer-{len(writers)}.err")
    writers.append(writer)
    return writer


def test_tokens_between_processes_and_after_a_restart(
    url_harness: UrlHarness, writers: list[Writer], name: str, tmp_path: pathlib.Path
) -> None:
    first, second = _start(writers, url_harness, name, tmp_path), _start(writers, url_harness, name, tmp_path)
    assert first.ask(op="put", key="k", value="first", token=10) == {"version": 1}
    assert second.ask(op="update", key="k", value="second", token=12) == {"version": 2}  # higher
    assert second.ask(op="update", key="k", value="second again", token=12) == {"version": 3}  # equal
    assert first.ask(op="update", key="k", value="stale", token=11) == {"error": "FencedError", "accepted": 12}
    assert first.ask(op="delete", key="k", token=10) == {"error": "FencedError", "accepted": 12}
    assert first.ask(op="put", key="new", value="stale", token=10) == {"error": "FencedError", "accepted": 12}
    first.stop()
    second.stop()
    restarted = _start(writers, url_harness, name, tmp_path)  # no client remembers anything
    assert restarted.ask(op="update", key="k", value="stale", token=11) == {"error": "FencedError", "accepted": 12}
    reader = url_harness.connect().storage(name)
    eventually(lambda: reader.fetch("k").result() == "second again", timeout=url_harness.settle)
    assert reader.fetch("new").result() is None
    assert restarted.ask(op="update", key="k", value="third", token=13) == {"version": 4}


def test_a_holder_frozen_past_its_lease_is_refused_after_its_successor_wrote(
    url_harness: UrlHarness, writers: list[Writer], name: str, tmp_path: pathlib.Path
) -> None:
    holder, successor = _start(writers, url_harness, name, tmp_path), _start(writers, url_harness, name, tmp_path)
    token = holder.ask(op="acquire")["token"]
    assert token is not None
    assert holder.ask(op="put", key="state", value="holder", token=None) == {"version": 1}
    os.kill(holder.process.pid, signal.SIGSTOP)  # frozen while holding: it cannot renew
    holder.send(op="update", key="state", value="late", token=None)  # read only once it runs again
    successor_token = successor.ask(op="acquire", timeout=180)["token"]  # after the frozen hold expired
    assert successor_token is not None and successor_token > token
    assert successor.ask(op="update", key="state", value="successor", token=None) == {"version": 2}
    started = time.monotonic()
    os.kill(holder.process.pid, signal.SIGCONT)
    late = holder.next(timeout=120)
    assert late == {"error": "FencedError", "accepted": successor_token}, (late, time.monotonic() - started)
    reader = url_harness.connect().storage(name)
    eventually(lambda: reader.fetch_versioned("state").result() is not None
               and reader.fetch("state").result() == "successor", timeout=url_harness.settle)
