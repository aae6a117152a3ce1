"""MemoryContext: the part of a memory coordinator its handles use (its session on the
shared state, lease timings, event log, value limit and listener dispatcher), handed to
them in place of the coordinator itself; kubernetes/context.py does the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubecoord._internal.dispatch import Dispatcher, ListenerSet
from kubecoord.backends.memory.state import Session, State, Subscription
from kubecoord.errors import ClosedError
from kubecoord.history import EventLog
from kubecoord.timings import Timings


@dataclass(eq=False)
class MemoryContext:
    state: State
    session: Session
    timings: Timings
    events: EventLog
    max_value_bytes: int
    dispatcher: Dispatcher
    backend: str = "memory"

    @property
    def crashed(self) -> bool:
        return self.session.crashed_at is not None

    def check_open(self) -> None:
        if self.session.closed or self.crashed:
            raise ClosedError("this memory coordinator was closed")

    def subscribe(self, listeners: ListenerSet[Any]) -> Subscription:
        return Subscription(self.session, self.dispatcher, listeners, self.events)

    def deliver(self, listeners: ListenerSet[Any], value: object) -> None:
        """Call ``listeners`` with ``value`` on the dispatcher thread, unless closed or crashed."""
        if not self.session.closed and not self.crashed:
            self.dispatcher.notify(listeners, value)
