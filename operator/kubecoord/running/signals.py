"""SIGTERM and SIGINT to a stop event, for the runners (the way a pod is told to stop)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def stopping_on_signals(stop: threading.Event, enabled: bool) -> Iterator[None]:
    """While inside: SIGTERM/SIGINT set ``stop`` instead of their previous action; the
    previous handlers are restored on exit. Only the main thread may install handlers:
    elsewhere (or with ``enabled`` False) this does nothing."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[signal.Signals, Any] = {}
    try:
        for stop_signal in STOP_SIGNALS:
            previous[stop_signal] = signal.signal(stop_signal, handler)
        yield
    finally:
        for stop_signal, old in previous.items():
            signal.signal(stop_signal, old)
