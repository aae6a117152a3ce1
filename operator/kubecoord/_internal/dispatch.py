"""Listener delivery on one dispatcher thread per coordinator.

Backends never call user callbacks themselves: they hand each change to a Dispatcher,
which calls the listeners on its own thread, one at a time, in submission order, with no
backend lock held. The listener set is read at delivery time, so a listener removed
before its turn is not called. A callback that raises is logged and skipped.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger("kubecoord.dispatch")

T = TypeVar("T")

_STOP = object()


class ListenerSet(Generic[T]):
    """A thread-safe, ordered set of callbacks taking one argument of type T."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[T], None]] = []

    def add(self, listener: Callable[[T], None]) -> None:
        with self._lock:
            if listener not in self._listeners:
                self._listeners.append(listener)

    def remove(self, listener: Callable[[T], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def snapshot(self) -> list[Callable[[T], None]]:
        with self._lock:
            return list(self._listeners)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._listeners)


class Dispatcher:
    """Runs listener callbacks on a dedicated daemon thread."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"kubecoord-dispatch-{name}", daemon=True)
        self._closed = False
        self._thread.start()

    def notify(self, listeners: ListenerSet[T], value: T) -> None:
        """Deliver ``value`` to every listener in ``listeners`` (as of delivery time)."""
        if not self._closed:
            self._queue.put((listeners, value))

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the dispatcher thread (ordered with the notifications)."""
        if not self._closed:
            self._queue.put(fn)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted so far was delivered. False on timeout."""
        if threading.current_thread() is self._thread:
            return True
        done = threading.Event()
        self._queue.put(done.set)
        return done.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued, then stop the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if callable(item):
                self._invoke(item)
                continue
            listeners, value = item
            for listener in listeners.snapshot():
                self._invoke(listener, value)

    @staticmethod
    def _invoke(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # a user's callback must not kill the dispatcher
            log.exception("listener raised; continuing with the next one")
