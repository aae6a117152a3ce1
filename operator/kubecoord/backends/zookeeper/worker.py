"""One thread per coordinator that re-reads ZooKeeper state after watches and state changes.

kazoo runs watch callbacks on its single callback thread and session-state callbacks on
its connection thread; neither may block on ZooKeeper requests. Every callback of this
backend therefore only posts a task here. Tasks with the same key coalesce while queued
(re-reading is idempotent and level-triggered, so one pending re-read is as good as
ten); tasks with key None (session-state changes) never coalesce and keep their order.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Hashable

log = logging.getLogger("kubecoord.zookeeper")


class Worker:
    def __init__(self, name: str) -> None:
        self._cond = threading.Condition()
        self._queue: collections.deque[tuple[Hashable | None, Callable[[], None]]] = collections.deque()
        self._pending: set[Hashable] = set()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"kubecoord-zk-{name}", daemon=True)
        self._thread.start()

    def post(self, key: Hashable | None, task: Callable[[], None]) -> None:
        with self._cond:
            if self._stopped or (key is not None and key in self._pending):
                return
            if key is not None:
                self._pending.add(key)
            self._queue.append((key, task))
            self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        """Drop what is queued and stop; waits for a running task unless called from it."""
        with self._cond:
            self._stopped = True
            self._queue.clear()
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                key, task = self._queue.popleft()
                if key is not None:
                    self._pending.discard(key)  # a post during the task queues a fresh re-read
            try:
                task()
            except Exception:  # one failing re-read must not stop the others
                log.exception("zookeeper background task failed", extra={"task": repr(task)})
