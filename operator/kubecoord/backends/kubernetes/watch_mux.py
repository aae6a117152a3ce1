"""The watch multiplexer: one thread reads every watch stream of the process.

Each reflector (reflector.py) runs its list/watch loop as a coroutine on one asyncio
event loop, on one daemon thread (``kubecoord-watch-mux``), instead of a thread per
watch: a client holding 200 election handles in the default ``object`` scope (a watch
per Lease, as RBAC granted by name requires) reads its 200 streams on this one thread.
Three more concerns live here because they belong to that loop:

- Dead streams. Every INTERVAL the loop asks each open stream how long it has been
  silent beyond its allowance (``Reflector.silent_for()``: the rule is the reflector's,
  from its own usual gap between events) and has the silent ones closed and re-opened
  from their last resourceVersion, without a re-list. A stream can die without a word (a
  proxy that stops forwarding, a half-open TCP connection); the read timeout alone would
  take a minute or more.
- Re-lists (after 410 Gone) are blocking requests through the official client: they run
  on a small pool (RELIST_WORKERS threads, started on demand), never on the loop.
- Lifetime: the thread starts with the first watch and ends, with the pool, after the
  last one stops, so a closed coordinator leaves no thread behind.

Guarantees: nothing on the loop waits for the network except by ``await``; a held,
slow or broken connection delays only its own stream. What runs on the loop per event
is the cache update and the informer's subscribers, which must be quick (they record
state and wake threads; listeners run on the coordinator's dispatcher thread).
Not guaranteed: that a dead idle stream is noticed before the server or the read
timeout ends it — an idle stream has no usual gap to exceed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

log = logging.getLogger("kubecoord.kubernetes.watch")

INTERVAL = 0.5
"""Seconds between two checks of the open streams' silence."""
RELIST_WORKERS = 2
THREAD_NAME = "kubecoord-watch-mux"


class Watched(Protocol):
    """What the multiplexer needs of a stream's owner (kubecoord.backends.kubernetes.reflector)."""

    @property
    def description(self) -> str: ...

    def silent_for(self) -> float | None: ...

    def restart_silent(self) -> None: ...


class Running:
    """One watch loop on the multiplexer: cancel() it from any thread, then wait() for its end."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self._loop = loop
        self.thread = thread
        self.task: asyncio.Task[None] | None = None
        self.finished = threading.Event()

    def cancel(self, *, first: Callable[[], None] | None = None) -> None:
        """Cancel the loop's task, after running ``first`` on the loop: Python 3.11's
        ``asyncio.wait_for`` loses a cancellation that lands as its read completes, so
        the owner should also end what the loop waits on (close its stream) there."""

        def cancel_task() -> None:
            if first is not None:
                first()
            if self.task is not None:
                self.task.cancel()

        if not self.finished.is_set():
            try:
                self._loop.call_soon_threadsafe(cancel_task)
            except RuntimeError:  # the loop already closed: the task ended with it
                self.finished.set()

    def wait(self, timeout: float) -> None:
        """Wait for the loop to end (and for the thread, when it was the last watch); never
        from the multiplexer's own thread, which cannot wait for itself."""
        if threading.current_thread() is self.thread:
            return
        self.finished.wait(timeout)
        if not multiplexer.serves(self.thread):
            self.thread.join(timeout)  # it was the last watch: the thread is ending


class WatchMux:
    """One event loop thread for every watch of the process (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._watched: set[Watched] = set()
        self._running = 0

    def run(self, watched: Watched, main: Callable[[], Coroutine[Any, Any, None]]) -> Running:
        """Run ``main()`` on the loop (starting the thread if none runs) until it returns or is cancelled."""
        with self._lock:
            if self._loop is None or self._thread is None:
                self._loop = asyncio.new_event_loop()
                self._loop.set_default_executor(
                    concurrent.futures.ThreadPoolExecutor(RELIST_WORKERS, thread_name_prefix="kubecoord-relist")
                )
                self._thread = threading.Thread(target=self._serve, args=(self._loop,), name=THREAD_NAME, daemon=True)
                self._thread.start()
            running = Running(self._loop, self._thread)
            self._running += 1
            self._watched.add(watched)
            asyncio.run_coroutine_threadsafe(self._guard(watched, main, running), self._loop)
        return running

    def serves(self, thread: threading.Thread) -> bool:
        """Whether ``thread`` is still the multiplexer's live thread."""
        with self._lock:
            return self._thread is thread

    @property
    def streams(self) -> int:
        """How many watch loops run (for tests and benchmarks)."""
        with self._lock:
            return self._running

    async def _guard(self, watched: Watched, main: Callable[[], Coroutine[Any, Any, None]], running: Running) -> None:
        running.task = asyncio.current_task()
        try:
            if not running.finished.is_set():
                await main()
        except asyncio.CancelledError:
            pass
        except Exception:  # main() handles its own failures; this is a bug, logged, not fatal to others
            log.exception("a watch loop ended unexpectedly", extra={"informer": watched.description})
        finally:
            with self._lock:
                self._watched.discard(watched)
                self._running -= 1
                if self._running == 0 and self._loop is asyncio.get_running_loop():
                    # The last watch: the thread ends; the next watch starts a new one.
                    self._loop.stop()
                    self._loop, self._thread = None, None
            running.finished.set()

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        checker = loop.create_task(self._check_silence())
        try:
            loop.run_forever()
        finally:
            checker.cancel()
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _check_silence(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL)
            with self._lock:
                watched = list(self._watched)
            for stream in watched:
                try:
                    if stream.silent_for() is not None:
                        stream.restart_silent()
                except Exception:  # the check must outlive any one stream's trouble
                    log.exception("silence check failed", extra={"informer": stream.description})


multiplexer = WatchMux()
