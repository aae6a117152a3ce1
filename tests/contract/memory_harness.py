"""The contract harness for memory://: one shared state per test, a manual clock."""

from __future__ import annotations

import threading
import uuid

from kubecoord.backends.memory.state import notify
from kubecoord.testing import ManualClock

from .harness import UrlHarness

SESSION_TIMEOUT = 5.0


class MemoryHarness(UrlHarness):
    name = "memory"
    settle = 5.0

    def __init__(self) -> None:
        self.clock = ManualClock()
        self._ticking = threading.Event()
        self._stop = threading.Event()
        super().__init__(
            f"memory://contract-{uuid.uuid4().hex[:8]}", clock=self.clock, lease_duration=SESSION_TIMEOUT
        )

    def delete_store(self, name: str) -> None:
        # Nothing outside the process can reach a memory:// store: empty it in the shared
        # state, telling listeners as a deletion on the other backends would.
        coordinator = self.connect()
        state = coordinator.state  # type: ignore[attr-defined]
        with state.lock:
            store = state.store(name)
            keys, store.entries = list(store.entries), {}
            store.fences = {}  # the marks go with the store, as its objects do elsewhere
            now = state.clock.now()
            for key in keys:
                notify(store.value_subscriptions.get(key, []), None, now)
            for namespace, subscriptions in store.key_set_subscriptions.items():
                notify(subscriptions, store.children(namespace), now)

    def now(self) -> float:
        return self.clock.now()

    def expire(self) -> None:
        """The sessions' jump; then the clock follows real time (as other backends' clocks
        do), so that what is measured on it after the expiry — a group leader's wait
        before it fences a departed member — passes within the test's settle time."""
        self.clock.advance(SESSION_TIMEOUT + 1)
        if not self._ticking.is_set():
            self._ticking.set()
            threading.Thread(target=self._tick, name="memory-harness-clock", daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(0.05):
            self.clock.advance(0.05)

    def close(self) -> None:
        self._stop.set()
        super().close()
