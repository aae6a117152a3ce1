"""A handle's poll loop, Cassandra's stand-in for a watch: started when something first needs
it (a candidate, a listener, a read), at most one at a time, never once its handle is
closed; stopped and joined by ``stop()``, after which the next need starts a fresh one."""

from __future__ import annotations

import threading
from collections.abc import Callable

from kubecoord._core.lease import Loop


class Poller:
    def __init__(self, name: str, step: Callable[[], float], *, closed: Callable[[], bool]) -> None:
        """``step``: one poll, returning the seconds until the next; ``closed``: whether the
        handle is closed (checked under the lock before starting)."""
        self._name = name
        self._step = step
        self._closed = closed
        self._lock = threading.Lock()
        self._loop: Loop | None = None

    def ensure(self) -> None:
        with self._lock:
            if self._loop is not None or self._closed():
                return
            loop = self._loop = Loop(self._name, self._step)
        loop.start()

    def stop(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.stop()
