"""A thread-safe list of callbacks told of one kind of value (a session's new lease, its
state): added and removed from any thread, called outside the lock so that a callback may
add or remove one, each callback's exception logged so that it cannot keep the others from
hearing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

_V = TypeVar("_V")


class Subscribers(Generic[_V]):
    def __init__(self, log: logging.Logger, failure: str) -> None:
        """``failure``: the message logged (with the traceback) when a callback raises."""
        self._log = log
        self._failure = failure
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[_V], None]] = []

    def add(self, callback: Callable[[_V], None]) -> None:
        with self._lock:
            self._callbacks.append(callback)

    def discard(self, callback: Callable[[_V], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def clear(self) -> None:
        with self._lock:
            self._callbacks.clear()

    def tell(self, value: _V) -> None:
        """Calls every callback added before this call began with ``value``, in order."""
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(value)
            except Exception:
                self._log.exception(self._failure, extra={"value": value})
