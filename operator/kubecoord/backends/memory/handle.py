"""What every memory handle shares: its coordinator, state and event log, and being closed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubecoord.errors import ClosedError

if TYPE_CHECKING:
    from kubecoord.backends.memory.coordinator import MemoryCoordinator


class Handle:
    def __init__(self, coordinator: MemoryCoordinator) -> None:
        self._coordinator = coordinator
        self._state = coordinator.state
        self._events = coordinator.events
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"this {type(self).__name__.removeprefix('Memory')} handle was closed")
        self._coordinator.check_open()

    def close(self) -> None:
        self._closed = True

    def crash(self) -> None:
        """Stop as kill -9 would (the coordinator's simulate_crash)."""
        self._closed = True
