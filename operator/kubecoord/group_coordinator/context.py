"""What the parts of one group member share: who it is, its protocol, the group's
record, the event log and the member's view.

The record is written only here, by compare-and-set (update()); user callbacks run only
here (callback()), so that one that raises is logged and never stops the member.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kubecoord._internal.clock import Clock
from kubecoord.api import GroupProtocol, Storage
from kubecoord.errors import BackendUnavailableError, CoordinationError, VersionConflictError
from kubecoord.group_coordinator.view import MemberView
from kubecoord.history import EventLog
from kubecoord.wire.events import Primitive
from kubecoord.wire.group_record import STATE_KEY, GroupState, decode_state, encode_state

log = logging.getLogger("kubecoord.coordinator")


class MemberContext:
    """Made once per GroupMember handle; its parts (following, leader duties, rejoin) take it."""

    def __init__(
        self,
        *,
        group: str,
        member_id: str,
        protocol: GroupProtocol,
        store: Storage,
        events: EventLog,
        session_timeout: float,
        rebalance_timeout: float,
        clock: Clock,
    ) -> None:
        self.group = group
        self.member_id = member_id
        self.protocol = protocol
        self.cooperative = protocol.rebalance_protocol == "cooperative"
        self.store = store
        self.events = events
        self.session_timeout = session_timeout
        self.rebalance_timeout = rebalance_timeout
        self.view = MemberView(member_id, session_timeout=session_timeout, cooperative=self.cooperative, clock=clock)

    def update(self, change: Callable[[GroupState], GroupState | None]) -> bool:
        """Compare-and-set ``change`` onto the record until it applies or declines (None)."""
        for _ in range(50):
            versioned = self.store.fetch_versioned(STATE_KEY).result()
            if versioned is None:
                return False
            new = change(decode_state(versioned.value))
            if new is None:
                return False
            try:
                self.store.update(STATE_KEY, encode_state(new), expected_version=versioned.version)
                return True
            except VersionConflictError:
                time.sleep(0.005)
        raise BackendUnavailableError(f"group {self.group!r}: the state record kept changing under 50 writes")

    def ask_rejoin(self) -> bool:
        """Ask the leader for a new generation (the record's ``rejoin`` flag)."""
        return self.update(lambda s: None if s.rejoin else s.evolve(rejoin=True))

    def callback(self, name: str, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # a user's callback must not stop the member
            log.exception("group protocol callback raised", extra={"group": self.group, "callback": name})

    def units(self, assignment: bytes | None) -> list[str] | None:
        """The unit names of an assignment, when the protocol can tell (UnitsProtocol can)."""
        if assignment is None:
            return None
        try:
            return self.protocol.units_of(assignment)
        except CoordinationError:
            return None

    def record(self, event: str, **fields: Any) -> None:
        fields.setdefault("member", self.member_id)
        self.events.record(primitive=Primitive.GROUP_COORDINATOR, name=self.group, event=event, **fields)
