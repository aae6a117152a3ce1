"""What every memory handle shares beyond the core's scaffolding: its coordinator, state and
event log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubecoord._core.handles import Handle

if TYPE_CHECKING:
    from kubecoord.backends.memory.coordinator import MemoryCoordinator


class MemoryHandle(Handle):
    def __init__(self, coordinator: MemoryCoordinator, name: str) -> None:
        super().__init__(coordinator, name, coordinator.events)
        self._coordinator = coordinator
        self._state = coordinator.state
        self._events = coordinator.events
