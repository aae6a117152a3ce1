"""The contract harness for memory://: one shared state per test, a manual clock."""

from __future__ import annotations

import uuid
from typing import Any

import kubecoord
from kubecoord import Coordinator
from kubecoord.testing import ManualClock, crash

from .harness import Harness

SESSION_TIMEOUT = 5.0


class MemoryHarness(Harness):
    name = "memory"
    settle = 5.0

    def __init__(self) -> None:
        self.url = f"memory://contract-{uuid.uuid4().hex[:8]}"
        self.clock = ManualClock()
        self.coordinators: list[Coordinator] = []

    def connect(self, **options: Any) -> Coordinator:
        options.setdefault("session_timeout", SESSION_TIMEOUT)
        coordinator = kubecoord.connect(self.url, clock=self.clock, **options)
        self.coordinators.append(coordinator)
        return coordinator

    def crash(self, coordinator: Coordinator) -> None:
        crash(coordinator)

    def expire(self) -> None:
        self.clock.advance(SESSION_TIMEOUT + 1)

    def close(self) -> None:
        for coordinator in self.coordinators:
            coordinator.close()
