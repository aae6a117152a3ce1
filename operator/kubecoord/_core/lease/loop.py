"""A background thread that calls step() again after the delay step() returns, or sooner
when woken (by a watch event). One per elector and one per joined group, on every backend that runs the lease core."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("kubecoord.lease.loop")

MAX_SLEEP = 5.0
"""Re-check at least this often, whatever step() asked (cheap: step() decides from caches)."""


class Loop:
    def __init__(self, name: str, step: Callable[[], float], *, lock: threading.Lock | None = None) -> None:
        self._step = step
        self._step_lock = lock or threading.Lock()
        self._cond = threading.Condition()
        self._woken = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify()

    def stop(self, *, join: bool = True, timeout: float = 10.0) -> None:
        """Stop after the current step; with ``join`` wait for it (never from the loop itself)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if join and threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def _run(self) -> None:
        while True:
            with self._step_lock:
                if self._stopped:
                    return
                try:
                    delay = self._step()
                except Exception:  # a bug in one step must not end leadership handling silently
                    log.exception("background step failed", extra={"loop": self._thread.name})
                    delay = 1.0
            with self._cond:
                if not self._woken and not self._stopped:
                    self._cond.wait(min(max(delay, 0.0), MAX_SLEEP))
                self._woken = False
