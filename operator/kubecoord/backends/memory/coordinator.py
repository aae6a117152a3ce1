"""MemoryCoordinator: one session on a shared in-process state, one dispatcher thread."""

from __future__ import annotations

from typing import Any

from kubecoord._core.handles import ContextHandles, CoordinatorBase, HandleTypes
from kubecoord._internal.clock import Clock
from kubecoord._internal.dispatch import Dispatcher, ListenerSet
from kubecoord.api import LeaderElection
from kubecoord.backends.memory.context import MemoryContext
from kubecoord.backends.memory.kv import MemoryListenerRegistry, MemoryStorage
from kubecoord.backends.memory.leader import MemoryLeaderElection
from kubecoord.backends.memory.membership import MemoryGroupMembership
from kubecoord.backends.memory.state import Session, State, Subscription
from kubecoord.errors import InvalidArgumentError
from kubecoord.history import EventLog
from kubecoord.timings import Timings

# The default lease timings as fractions of lease_duration: a leader renews every 0.4 of
# it and counts as leader until 0.9 of it after its last renewal, so it knows it lost
# before a follower may take over (the lease core's rule lease_duration > renew_deadline >
# 1.2 x retry_period holds for every lease_duration).
RENEW_DEADLINE_SHARE = 0.9
RETRY_PERIOD_SHARE = 0.4


def lease_timings(
    lease_duration: float, *, renew_deadline: float | None = None, retry_period: float | None = None
) -> Timings:
    """The coordinator's timings; the shares above where renew_deadline or retry_period is not
    given. InvalidArgumentError for a value that breaks the lease rule."""
    if isinstance(lease_duration, bool) or not isinstance(lease_duration, int | float) or not lease_duration > 0:
        raise InvalidArgumentError(f"memory backend: lease_duration must be a positive number, got {lease_duration!r}")
    return Timings(
        lease_duration=lease_duration,
        renew_deadline=lease_duration * RENEW_DEADLINE_SHARE if renew_deadline is None else renew_deadline,
        retry_period=lease_duration * RETRY_PERIOD_SHARE if retry_period is None else retry_period,
    )


class MemoryCoordinator(ContextHandles, CoordinatorBase):
    """A coordinator on an in-process state. See kubecoord.backends.memory for options."""

    handle_types = HandleTypes(MemoryGroupMembership, MemoryStorage, MemoryListenerRegistry)

    backend = "memory"

    def __init__(self, state: State, *, timings: Timings, max_value_bytes: int, events: EventLog) -> None:
        self.state = state
        self.session = Session(timeout=timings.lease_duration)
        self.timings = timings
        self.events = events
        self.max_value_bytes = max_value_bytes
        self._dispatcher = Dispatcher(f"memory-{self.session.id}")
        self.context = MemoryContext(
            state=state, session=self.session, timings=self.timings, events=events, max_value_bytes=max_value_bytes,
            dispatcher=self._dispatcher,
        )
        super().__init__(handle_owner=self.context)

    @property
    def crashed(self) -> bool:
        return self.context.crashed

    def _clock(self) -> Clock:
        return self.state.clock

    # -- handles ------------------------------------------------------------------
    def _open_leader_election(self, service: str, **timings: Any) -> LeaderElection:
        """A LeaderElection on the record ``service``; timings (lease_duration, renew_deadline,
        retry_period) default to the coordinator's."""
        return MemoryLeaderElection(self.context, service, self.timings.with_overrides(**timings))


    # -- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        if self.session.closed or self.crashed:
            return
        self._close_group_members()
        for handle in reversed(self._tracked()):
            handle.close()
        with self.state.lock:
            self.session.closed = True
        self._dispatcher.close()
        self.events.close()

    def simulate_crash(self) -> None:
        """Stop as a killed process would: no resign, no leave, no more callbacks.

        Leadership and memberships of this session expire ``lease_duration`` after it on
        the state's clock: its leaders renew once more (the heartbeat a process logs just
        before kill -9) and stop; its memberships last that long after the crash. A test
        hook, the in-process analogue of kill -9.
        """
        self.check_open()
        handles = self._tracked()
        for handle in handles:
            if isinstance(handle, MemoryLeaderElection):
                handle.crash()
        with self.state.lock:
            self.state.record_heartbeats(self.session)
        self.state.crash(self.session)
        for handle in handles:
            handle.crash()
        self._dispatcher.close(timeout=0)
        self.events.close()

    def check_open(self) -> None:
        self.context.check_open()

    def subscribe(self, listeners: ListenerSet[Any]) -> Subscription:
        return self.context.subscribe(listeners)

    def deliver(self, listeners: ListenerSet[Any], value: object) -> None:
        """Call ``listeners`` with ``value`` on the dispatcher thread, unless closed or crashed."""
        self.context.deliver(listeners, value)
