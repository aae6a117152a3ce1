"""The etcd tests: the session's etcd (testkit plugin), processes reaped by their fixtures."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import IO

import pytest

from kubecoord_testkit import processes
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.etcd import EtcdCluster

from .etcdctl import Etcdctl

Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Start ``python -m tests.backends.etcd.candidate_process ARGS``; every process is reaped."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.backends.etcd.candidate_process", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        started.append(process)
        return process

    yield start
    processes.stop_all(started, 5.0)


@pytest.fixture
def etcdctls() -> Iterator[list[Etcdctl]]:
    """Peers a test started (append them): stopped and reaped at the end."""
    peers: list[Etcdctl] = []
    yield peers
    for peer in peers:
        peer.stop()


def read_line(process: subprocess.Popen[str], timeout: float) -> str | None:
    """The next line ``process`` printed within ``timeout`` seconds, or None (also at the end
    of its output, and for an empty line).

    One reader thread per process reads its stdout line by line into a queue, so lines that
    reach the pipe together are each returned: a select() on the pipe cannot see a line
    already read into the stream's buffer along with the one before it."""
    assert process.stdout is not None
    with _readers_lock:
        lines = _readers.get(process)
        if lines is None:
            lines = _readers[process] = queue.Queue()
            threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True,
                             name=f"read-lines-{process.pid}").start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        return None
    if line is None:
        lines.put(None)  # the end stays the end for every later call
    return line or None


_readers: weakref.WeakKeyDictionary[subprocess.Popen[str], queue.Queue[str | None]] = weakref.WeakKeyDictionary()
_readers_lock = threading.Lock()


def _read_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    try:
        for line in stream:
            lines.put(line.rstrip("\n"))
    except (OSError, ValueError):  # the test closed the pipe
        pass
    lines.put(None)


@pytest.fixture
def proxies(etcd_server: EtcdCluster) -> Iterator[list[ThreadedFaultProxy]]:
    """Two fault proxies to the one etcd member: the endpoints of a two-endpoint etcd:// URL."""
    upstream = ("127.0.0.1", etcd_server.members[0].client_port)
    with ThreadedFaultProxy(upstream) as first, ThreadedFaultProxy(upstream) as second:
        yield [first, second]


def eventually(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Wait until ``condition()`` holds (a watch event, a keep-alive after a fault); fails
    with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
