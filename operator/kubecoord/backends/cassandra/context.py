"""What every handle of one Cassandra coordinator shares: its driver session, the dispatcher
thread that runs its listeners, the event log, the options and timings, and this
coordinator's session id (the owner of its member rows).

The handles take this, not the coordinator (as the other backends' handles take their
contexts), so that they depend on what they use and the coordinator module on them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kubecoord._internal.clock import Clock, MonotonicClock
from kubecoord._internal.dispatch import Dispatcher
from kubecoord.backends.cassandra.options import Options
from kubecoord.backends.cassandra.session import Session
from kubecoord.errors import ClosedError
from kubecoord.history import EventLog
from kubecoord.timings import Timings


@dataclass(eq=False)
class CassandraContext:
    session: Session
    dispatcher: Dispatcher
    events: EventLog
    options: Options
    timings: Timings
    clock: Clock = field(default_factory=MonotonicClock)
    session_id: uuid.UUID = field(default_factory=uuid.uuid4)
    """Names this coordinator's member rows (a process's session, as on ZooKeeper)."""
    closed: bool = False
    """Set by the coordinator's close() and simulate_crash() (under its lock)."""
    crashed: bool = False
    backend: str = "cassandra"

    def check_open(self) -> None:
        if self.closed:
            raise ClosedError("this cassandra coordinator was closed")
