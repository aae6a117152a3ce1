"""The etcd tests: the session's etcd (testkit plugin), processes reaped by their fixtures."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator

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
    """The next line ``process`` printed within ``timeout`` seconds, or None."""
    import selectors

    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return None
    line = process.stdout.readline()
    return line.rstrip("\n") or None


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
