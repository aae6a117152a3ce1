"""One thread per group member: it runs the member's step when woken (a listener saw a
change) and at least every ``interval`` (polling, which is also how the member confirms
its session), or earlier when a timer of the leader's rules is due (on the coordinator's
clock; a manual clock wakes the thread whenever it is advanced).

A step that raises is retried on the next wake (logged: a backend that is unavailable
at debug level, another CoordinationError as a warning, any other exception as an error
with its traceback); only ClosedError ends the thread. Not guaranteed: that stop()
returns only after the thread ended — it waits ``timeout`` at most, and never for
itself (a callback that calls leave()).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubecoord._internal.clock import Clock
from kubecoord.errors import BackendUnavailableError, ClosedError, CoordinationError

log = logging.getLogger("kubecoord.coordinator")


class MemberWorker:
    def __init__(
        self,
        group: str,
        *,
        interval: float,
        step: Callable[[], None],
        running: Callable[[], bool],
        wake_at: Callable[[], float | None],
        clock: Clock,
    ) -> None:
        self._group = group
        self._clock = clock
        self._interval = interval
        self._step = step
        self._running = running
        self._wake_at = wake_at
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        clock.on_advance(self.wake)  # a manual clock's jump may have passed a timer

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"kubecoord-group-{self._group}", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float) -> None:
        """Wake the thread (running() is False by now) and wait up to ``timeout`` for it."""
        thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while self._running():
            wake_at = self._wake_at()
            timeout = self._interval if wake_at is None else max(0.0, min(self._interval, wake_at - self._clock.now()))
            self._wake.wait(timeout)
            self._wake.clear()
            try:
                self._step()
            except ClosedError:
                return
            except BackendUnavailableError as exc:
                log.debug("group step failed; retrying", extra={"group": self._group, "error": str(exc)})
            except CoordinationError as exc:
                log.warning("group step failed; retrying", extra={"group": self._group, "error": str(exc)})
            except Exception:
                # Anything else (a protocol callback's bug, data nobody anticipated) must not
                # end the thread: a group whose worker died never rebalances again.
                log.exception("group step raised; retrying", extra={"group": self._group})
