"""What one group member knows of its group, and the one lock that guards it.

The handle's public reads (generation, assignment, is_stable, ensure_generation) and the
worker's writes meet here; every change notifies the condition, so wait_stable() wakes.
Not here: what to do with the view (following.py, leader_duties.py).
"""

from __future__ import annotations

import threading

from kubecoord._internal.clock import Clock
from kubecoord.wire.group_record import GroupState

NO_GENERATION = -1


class MemberView:
    """The member's view; read and write its fields only while holding ``lock``."""

    def __init__(self, member_id: str, *, session_timeout: float, cooperative: bool, clock: Clock) -> None:
        self.lock = threading.Condition()
        self.clock = clock
        """The coordinator's clock: what confirmations and the leader's timers are measured on."""
        self.member_id = member_id
        self.session_timeout = session_timeout
        self.cooperative = cooperative
        self.generation = NO_GENERATION
        """The generation of the assignment this member works on."""
        self.assignment: bytes | None = None
        self.protocol_name: str | None = None
        self.latest: GroupState | None = None
        """The newest record read (a record of an older generation never replaces it)."""
        self.confirmed_at = float("-inf")
        """Time (on ``clock``) of the start of the last read of the record that succeeded."""

    def observe(self, state: GroupState | None, read_at: float) -> None:
        """A read of the record that started at ``read_at`` succeeded with ``state``."""
        with self.lock:
            if state is None or self.latest is None or state.generation >= self.latest.generation:
                self.latest = state
            self.confirmed_at = max(self.confirmed_at, read_at)
            self.lock.notify_all()

    def stable(self) -> bool:
        """(Under lock.) The member holds an assignment of the latest generation it saw
        (cooperative: or of an earlier one, while it is a member of the latest)."""
        latest = self.latest
        return (
            self.assignment is not None
            and latest is not None
            and (latest.generation == self.generation or (self.cooperative and self.member_id in latest.members))
        )

    def confirmed(self) -> bool:
        """(Under lock.) A read of the record succeeded within the session timeout."""
        return self.clock.now() - self.confirmed_at <= self.session_timeout
