"""The contract harness for memory://: one shared state per test, a manual clock."""

from __future__ import annotations

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
        self.clock.advance(SESSION_TIMEOUT + 1)
