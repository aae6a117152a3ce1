"""What every memory handle shares beyond the core's scaffolding: its coordinator's context
(context.py), the state and the event log."""

from __future__ import annotations

from kubecoord._core.handles import Handle
from kubecoord.backends.memory.context import MemoryContext


class MemoryHandle(Handle):
    def __init__(self, context: MemoryContext, name: str) -> None:
        super().__init__(context, name, context.events)
        self._context = context
        self._state = context.state
        self._events = context.events
