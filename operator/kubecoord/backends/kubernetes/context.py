"""What every handle of one Kubernetes coordinator shares."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kubecoord._internal.clock import Clock
from kubecoord._internal.dispatch import Dispatcher
from kubecoord.backends.kubernetes.client import KubeClient
from kubecoord.backends.kubernetes.timings import Timings
from kubecoord.backends.kubernetes.watch import InformerPool
from kubecoord.errors import ClosedError
from kubecoord.history import EventLog


@dataclass(eq=False)
class Context:
    client: KubeClient
    informers: InformerPool
    clock: Clock
    dispatcher: Dispatcher
    events: EventLog
    timings: Timings
    max_value_bytes: int
    closed: bool = False
    crashed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def namespace(self) -> str:
        return self.client.namespace

    def check_open(self) -> None:
        if self.closed or self.crashed:
            raise ClosedError("this kubernetes coordinator was closed")


class HandleBase:
    """Open/closed state shared by the four handle types."""

    _kind = "handle"

    def __init__(self, context: Context) -> None:
        self._context = context
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"this {self._kind} handle was closed")
        self._context.check_open()

    def crash(self) -> None:
        """Stop every background activity without writing anything (simulate_crash)."""
        self._closed = True
