"""The process-wide watchdog: one thread that re-opens silent watch streams.

A watch stream can die without a word (a proxy that stops forwarding, a half-open TCP
connection): the reflector would wait for its read timeout, a minute or more. Every
INTERVAL the watchdog asks each open stream how long it has been silent beyond its
allowance (Reflector.silent_for(): the rule is the reflector's, from its own usual gap
between events) and has the silent ones re-opened from their last resourceVersion,
without a re-list. The thread starts with the first stream and ends with the last.

Not guaranteed: that a dead idle stream is noticed before the server or the read
timeout ends it — an idle stream has no usual gap to exceed.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Protocol

log = logging.getLogger("kubecoord.kubernetes.watch")


class Watched(Protocol):
    """What the watchdog needs of a stream's owner (kubecoord.backends.kubernetes.reflector)."""

    @property
    def description(self) -> str: ...

    def silent_for(self) -> float | None: ...

    def restart_silent(self) -> None: ...


class Watchdog:
    """One thread per process that re-opens silent watch streams (held weakly)."""

    INTERVAL = 0.5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: weakref.WeakSet[Watched] = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def watch(self, watched: Watched) -> None:
        with self._lock:
            self._watched.add(watched)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="kubecoord-silence-detector", daemon=True)
                self._thread.start()

    def unwatch(self, watched: Watched) -> None:
        with self._lock:
            self._watched.discard(watched)

    def _run(self) -> None:
        while True:
            time.sleep(self.INTERVAL)
            with self._lock:
                watched = list(self._watched)
                if not watched:  # ends with the last stream; watch() starts it again
                    self._thread = None
                    return
            for stream in watched:
                try:
                    if stream.silent_for() is not None:
                        stream.restart_silent()
                except Exception:  # the watchdog must outlive any one stream's trouble
                    log.exception("watchdog check failed", extra={"informer": stream.description})


watchdog = Watchdog()
