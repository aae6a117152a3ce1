"""A member's place in the group membership: the data it joins with, and joining again
once the membership lost it.

The membership (the backend's primitive) can drop a member that is still running: its
session expired (a pause, a partition) or its Lease was deleted, and the leader then
excludes it. Kafka's consumer rejoins the same way when the coordinator no longer knows
its member id; without this the member would sit out for good.

The data is the protocol's join_metadata(), not metadata(): it must fit the membership's
data cap (64 KiB) whatever the member owns at that moment (a member owning 4,096 units
named in full would carry 84 KB with two assignors); the member's full metadata goes to
the record when it joins the next generation. A join again that fails (the server does
not answer, the data is refused) is logged and retried on the worker's next step; it
never keeps the step from following the record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubecoord.api import GroupMembership, GroupProtocol
from kubecoord.errors import CoordinationError, MemberExistsError
from kubecoord.group_coordinator.context import MemberContext
from kubecoord.group_coordinator.record import check_protocols
from kubecoord.wire.group_record import encode_join_data

log = logging.getLogger("kubecoord.coordinator")


def join_data(protocol: GroupProtocol) -> str:
    """The membership data: the protocol type and this member's protocols with their
    join_metadata() (checked)."""
    return encode_join_data(protocol.protocol_type, check_protocols(protocol.join_metadata()))


class Rejoiner:
    """Keeps the membership listener's last view; rejoin_if_expelled() runs on the worker."""

    def __init__(self, context: MemberContext, membership: GroupMembership, wake: Callable[[], None]) -> None:
        self._ctx = context
        self._membership = membership
        self._wake = wake
        self._seen: frozenset[str] | None = None  # the membership listener's last view

    def reset(self) -> None:
        """Forget the last view (at join: an old view must not make the new member rejoin)."""
        self._seen = None

    def on_members(self, members: set[str]) -> None:
        """The membership listener."""
        self._seen = frozenset(members)
        self._wake()

    def rejoin_if_expelled(self) -> None:
        """Join the membership again once it is gone while this member is joined. A view
        that is merely behind (the backend still holds the member) makes the join raise
        MemberExistsError, which changes nothing."""
        seen, me = self._seen, self._ctx.member_id
        if seen is None or me in seen:
            return
        try:
            self._membership.join(me, data=join_data(self._ctx.protocol))
        except MemberExistsError:
            return
        except CoordinationError as exc:  # the step goes on; the next one tries again
            log.warning("joining again after the membership was lost failed; retrying",
                        extra={"group": self._ctx.group, "member": me, "error": str(exc)})
            return
        log.warning("joined again after the membership was lost", extra={"group": self._ctx.group, "member": me})
