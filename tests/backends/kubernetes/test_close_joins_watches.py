"""close() leaves no watch thread behind: a short-lived process (the kubecoord command)
must not exit while a daemon thread is inside the HTTP client, which can abort it.

Python 3.11's ``asyncio.wait_for`` loses a cancellation that lands as the read it waits
on completes (a group member's own Lease deleted by close() sends an event at that very
moment): the watch loop then went on reading, the multiplexer's thread outlived close()
(1 in ~1,400 closes at load 2-9). stop() now also closes the stream on the loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from kubecoord._internal.clock import MonotonicClock
from kubecoord.backends.kubernetes.cache import ObjectCache
from kubecoord.backends.kubernetes.reflector import Reflector
from kubecoord.backends.kubernetes.watch_mux import multiplexer

from .conftest import Connect

CYCLES = 20


def _watch_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("kubecoord-watch") and t.is_alive()]


def test_no_watch_thread_outlives_close(connect: Connect, name: str) -> None:
    for _ in range(CYCLES):
        coordinator = connect()
        coordinator.storage(name).fetch_versioned("k").result(10)
        coordinator.leader_election(name).get_leader()
        coordinator.group_membership(name).membership()
        coordinator.close()
        assert _watch_threads() == []


class _DeafStream:
    """A watch stream that loses every cancellation, as a wait_for racing its read does:
    only close() ends it."""

    def __init__(self) -> None:
        self._closed = asyncio.Event()

    def close(self) -> None:
        self._closed.set()

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        while not self._closed.is_set():
            try:
                await self._closed.wait()
            except asyncio.CancelledError:
                continue  # lost, as in wait_for
        return
        yield {}


class _Resource:
    plural = "leases"


class _DeafSource:
    resource = _Resource()
    description = "leases[deaf]"

    def __init__(self) -> None:
        self.opened = threading.Event()

    def list(self) -> tuple[list[dict[str, Any]], str]:
        return [], "1"

    async def watch(self, since: str, timeout_seconds: int) -> _DeafStream:
        self.opened.set()
        return _DeafStream()

    def wanted(self, obj: dict[str, Any]) -> bool:
        return True


def test_a_lost_cancellation_does_not_keep_the_watch_alive() -> None:
    source = _DeafSource()
    reflector = Reflector(source, ObjectCache(MonotonicClock()), on_change=lambda: None, watch_timeout=60)  # type: ignore[arg-type]
    reflector.start()
    assert source.opened.wait(10)
    time.sleep(0.2)  # the loop is inside the stream's read
    started = time.monotonic()
    reflector.stop()
    assert time.monotonic() - started < 4.0, "stop() waited out its timeout: the loop did not end"
    assert multiplexer.streams == 0
    assert _watch_threads() == []
