"""The contract harness for memory://: one shared state per test, a manual clock."""

from __future__ import annotations

import uuid

from kubecoord.testing import ManualClock

from .harness import UrlHarness

SESSION_TIMEOUT = 5.0


class MemoryHarness(UrlHarness):
    name = "memory"
    settle = 5.0

    def __init__(self) -> None:
        self.clock = ManualClock()
        super().__init__(
            f"memory://contract-{uuid.uuid4().hex[:8]}", clock=self.clock, session_timeout=SESSION_TIMEOUT
        )

    def expire(self) -> None:
        self.clock.advance(SESSION_TIMEOUT + 1)
