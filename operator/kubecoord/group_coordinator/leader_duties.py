"""What the elected member does as the group's leader, on each read of the record.

It reads the live membership (members of another protocol type are ignored), applies
the leader's rules (leading.decide(): start a generation, assign it, fence departed
holders, exclude laggards), runs the protocol's perform_assignment() when a generation
is assigned, and publishes the new record by compare-and-set. A write that loses the
compare-and-set is not retried here: the worker reads again and the rules decide anew.

Not here: the rules themselves (leading.py), the member's own part (following.py). A
group whose record says ``assigned_by`` (the operator assigns it) is left alone.
"""

from __future__ import annotations

import logging
import time

from kubecoord.api import GroupMembership, LeaderElection
from kubecoord.errors import GroupProtocolError
from kubecoord.group_coordinator.context import MemberContext
from kubecoord.group_coordinator.leading import Decision, LeaderTimers, decide
from kubecoord.group_coordinator.record import publish
from kubecoord.wire.events import Event
from kubecoord.wire.group_record import STABLE, GroupState, Protocols, decode_join_data

log = logging.getLogger("kubecoord.coordinator")


class LeaderDuties:
    """Runs on the member's worker thread only; ``wake_at`` is read under the view's lock."""

    def __init__(self, context: MemberContext, membership: GroupMembership) -> None:
        self._ctx = context
        self._membership = membership
        self._timers = LeaderTimers()
        self._malformed: set[str] = set()
        """Members already warned about (once each, not on every read of the record)."""
        self.wake_at: float | None = None
        """Monotonic time at which a timer of the rules may change the decision, or None."""

    def step(self, election: LeaderElection, state: GroupState | None, version: int | None) -> bool:
        """Lead once over ``state`` read at ``version``; True when the record was written
        or another writer came first (read it again)."""
        ctx = self._ctx
        leader = election.get_leader()
        if leader is None or leader.id != ctx.member_id:
            return False
        if state is not None and state.leader_epoch > leader.epoch:
            return False  # a newer leader wrote already; this view is stale
        if state is not None and state.assigned_by is not None:
            return False  # the operator assigns this group (Group spec.assignment)
        protocol_type = ctx.protocol.protocol_type
        live: dict[str, Protocols] = {}
        for member, data in self._membership.membership().items():
            decoded = decode_join_data(data)
            if decoded is not None and decoded[0] != protocol_type:
                log.warning("member of another protocol type ignored", extra={"group": ctx.group, "member": member})
                continue
            if decoded is None or not self._accepted(decoded[1]):
                if member not in self._malformed:
                    self._malformed.add(member)
                    log.warning("member with malformed membership data excluded", extra={"group": ctx.group,
                                                                                          "member": member})
                continue
            live[member] = decoded[1]
        base = state or GroupState(generation=0, phase=STABLE, protocol_type=protocol_type)
        now = ctx.view.clock.now()
        try:
            decision = decide(
                base, live, leader_id=ctx.member_id, epoch=leader.epoch, now=now, wall=time.time(),
                timers=self._timers, session_timeout=ctx.session_timeout,
                rebalance_timeout=ctx.rebalance_timeout, assign=self._assign, readable=self._readable,
            )
        except GroupProtocolError as exc:
            log.error("cannot assign the group", extra={"group": ctx.group, "error": str(exc)})
            return False
        with ctx.view.lock:
            self.wake_at = None if decision.wake_in is None else now + decision.wake_in
        return self._publish(decision, version, base.holders)

    def _accepted(self, protocols: Protocols) -> bool:
        """The protocol's verdict on a member's metadata; a hook that raises refuses it."""
        try:
            return all(self._ctx.protocol.accepts_metadata(name, data) for name, data in protocols)
        except Exception:
            log.exception("accepts_metadata() raised; the member is excluded", extra={"group": self._ctx.group})
            return False

    def _readable(self, protocols: Protocols) -> bool:
        """The same verdict on the metadata a member wrote into the record when it joined
        the generation (its metadata(), which may differ from its membership data)."""
        return bool(protocols) and self._accepted(protocols)

    def _assign(self, protocol: str, metadata: dict[str, bytes]) -> dict[str, bytes]:
        result = self._ctx.protocol.perform_assignment(self._ctx.member_id, protocol, metadata)
        if not isinstance(result, dict):
            raise GroupProtocolError("perform_assignment() must return a dict of member id -> bytes")
        for member, assignment in result.items():
            if member not in metadata:
                raise GroupProtocolError(f"perform_assignment() assigned to {member!r}, not a member")
            if not isinstance(assignment, bytes | bytearray):
                raise GroupProtocolError(f"perform_assignment() gave {member!r} a {type(assignment).__name__}")
        return {m: bytes(a) for m, a in result.items()}

    def _publish(self, decision: Decision, version: int | None, holders: frozenset[str]) -> bool:
        if decision.state is None:
            return False
        if not publish(self._ctx.store, decision.state, version):
            return True  # someone wrote first: read again
        record = self._ctx.record
        # Holders the leader dropped are departed members it fenced (session_timeout passed
        # since a record without them): from here on their units may move. A killed member
        # logs nothing more, so this is the event that ends what it held.
        for fenced in sorted(holders - decision.state.holders):
            record(Event.FENCED, member=fenced, generation=decision.state.generation, role="leader")
        if decision.kind == "rebalance":
            record(Event.REBALANCE_STARTED, generation=decision.state.generation, role="leader",
                   members=sorted(decision.state.members))
        elif decision.kind == "complete":
            record(Event.REBALANCE_COMPLETED, generation=decision.state.generation, role="leader",
                   protocol=decision.state.protocol)
        return True
