"""A rate-limited, de-duplicating work queue (client-go's ``util/workqueue``) on one asyncio loop.

    queue: WorkQueue[str] = WorkQueue()
    queue.add("ns/name")              # from an event handler: cheap, never blocks
    key = await queue.get()           # a worker
    try:
        ok = await reconcile(key)
    finally:
        queue.done(key)
    if ok: queue.forget(key)          # reset the key's backoff
    else:  queue.add_rate_limited(key)

Guarantees (the client-go contract):
- De-duplication: a key added many times before a worker takes it is processed once.
- A key is never processed by two workers at once: a key added while it is being
  processed is queued again when ``done`` is called, not before.
- FIFO among distinct keys; ``add_after`` keeps one pending timer per key (the earliest).
- ``add_rate_limited`` delays a key by ``base * 2**failures`` (capped at ``max_delay``)
  until ``forget`` resets it: a failing resource backs off, the others are not slowed.
- ``add_threadsafe`` may be called from any thread (listener threads of the backend).
Not guaranteed: fairness between keys beyond FIFO, persistence (the queue is memory only;
a restarted operator rebuilds it from the informers' initial lists).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """get() on a queue that is shut down."""


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay: float = 0.05, max_delay: float = 30.0) -> None:
        self._base, self._max = base_delay, max_delay
        self._queue: collections.deque[K] = collections.deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shut = False

    # -- adding -------------------------------------------------------------------------
    def add(self, key: K) -> None:
        """Queue ``key`` unless it is queued already. From a thread other than the queue's
        loop (kopf runs synchronous handlers in executor threads) it is handed to the loop:
        waking a waiting worker is only safe there."""
        loop = self._loop
        if loop is not None and _running_loop() is not loop:
            self.add_threadsafe(key)
            return
        self._add(key)

    def _add(self, key: K) -> None:
        if self._shut or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._notify()

    def add_threadsafe(self, key: K) -> None:
        """``add`` from any thread (a no-op before the queue's loop has started)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if _running_loop() is loop:
            self._add(key)
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (operator stopping)
                loop.call_soon_threadsafe(self._add, key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` once ``delay`` seconds have passed (at once when ``delay <= 0``);
        on the queue's loop."""
        if delay <= 0:
            self.add(key)
            return
        loop = self._bind()
        due = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= due:
                return  # an earlier timer will queue it
            pending[1].cancel()
        self._timers[key] = (due, loop.call_at(due, self._fire, key))

    def add_rate_limited(self, key: K) -> None:
        """Queue ``key`` after its backoff, which doubles on every call until ``forget``."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.add_after(key, self.backoff(failures))

    def backoff(self, failures: int) -> float:
        return float(min(self._max, self._base * (2 ** min(failures, 30))))

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (its last processing succeeded)."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def discard(self, key: K) -> None:
        """Drop ``key``'s pending timer and backoff (its resource is gone)."""
        self._failures.pop(key, None)
        pending = self._timers.pop(key, None)
        if pending is not None:
            pending[1].cancel()

    # -- taking -------------------------------------------------------------------------
    async def get(self) -> K:
        """The next key (waiting for one); the caller must call ``done(key)`` afterwards."""
        loop = self._bind()
        while not self._queue:
            if self._shut:
                raise ShutDown
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """``key`` is processed; if it was added meanwhile it goes back on the queue."""
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._notify()

    def shut_down(self) -> None:
        """Wake every waiting worker with ShutDown; cancel timers; further adds are ignored."""
        self._shut = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._queue.clear()
        self._dirty.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def processing(self) -> int:
        return len(self._processing)

    # -- internals ----------------------------------------------------------------------
    def _bind(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self._add(key)

    def _notify(self) -> None:
        """Wake one waiting worker (one key was queued)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
