"""The member's side of a rebalance: a state machine over the generation record.

On every read of the record (the worker's step), the member:

1. sees a rebalance it is part of start (phase "rebalancing", a newer generation):
   runs on_join_prepare once per generation (eager: revokes everything it holds), then
   joins the generation in the record with its fresh metadata;
2. sees the generation it joined assigned (phase "stable"): revokes what the new
   assignment takes away (cooperative), runs on_join_complete, and from then on works on
   its share;
3. sees a stable generation go by without it while it holds units: they are lost
   (on_lost), the member holds nothing until the next generation it joins;
4. sees a stable generation that lists it although it did not prepare for it since it
   last joined (it left and joined again, or it is a new handle under an old member's
   id): asks for a new generation (the record's ``rejoin`` flag) rather than taking
   that generation's assignment — it gave those units up when it left, and the record no
   longer names it among their holders, so the leader would not fence it;
5. (cooperative only) asks for the follow-up rebalance its protocol wants (rejoin_needed).

And on leave(): on_leave_prepare, revoke what is held, drop out of the record's holders,
and forget the generations it prepared for and joined.
Every step reads the record afresh; a write that lost a compare-and-set is retried on
the next read, so the machine is driven by the record, not by its own history.
"""

from __future__ import annotations

import logging

from kubecoord.errors import CoordinationError
from kubecoord.group_coordinator.context import MemberContext
from kubecoord.group_coordinator.record import check_protocols
from kubecoord.group_coordinator.view import NO_GENERATION
from kubecoord.wire.events import Event
from kubecoord.wire.group_record import REBALANCING, STABLE, GroupState

log = logging.getLogger("kubecoord.coordinator")


class Follower:
    """Runs on the member's worker thread only (leave() once that thread stopped)."""

    def __init__(self, context: MemberContext) -> None:
        self._ctx = context
        self._view = context.view
        self._prepared = NO_GENERATION  # last generation whose on_join_prepare ran
        self._joined_generation = NO_GENERATION  # last generation this member joined in the record

    def step(self, state: GroupState) -> bool:
        """Act on ``state``; True when this wrote the record (read it again)."""
        ctx, me = self._ctx, self._ctx.member_id
        with self._view.lock:
            generation, held = self._view.generation, self._view.assignment is not None
        if state.phase == REBALANCING and state.generation > self._joined_generation:
            involved = me in state.members or me in state.excluded or me in state.holders
            if not involved:
                return False
            if self._prepared < state.generation:
                self._prepare(generation, held, state.generation)
            return self._join_generation(state.generation)
        if state.phase == STABLE and state.generation > generation:
            if me in state.members and self._prepared >= state.generation:
                self._complete(state)
                if ctx.cooperative and ctx.protocol.rejoin_needed():
                    return ctx.ask_rejoin()
                return False
            if held:  # a generation went by without this member: what it held is gone
                self._lose(generation)
            if me in state.members:  # listed, but not for this join of it: a new generation
                return ctx.ask_rejoin()
            return False
        if ctx.cooperative and ctx.protocol.rejoin_needed():
            return ctx.ask_rejoin()
        return False

    def leave(self) -> None:
        """Stop taking part: on_leave_prepare, revoke what is held, release it in the record."""
        ctx, view = self._ctx, self._view
        # A join() after this starts afresh: generations prepared for or joined before are
        # not this member's any more (their units are given up below).
        self._prepared = self._joined_generation = NO_GENERATION
        ctx.callback("on_leave_prepare", ctx.protocol.on_leave_prepare)
        with view.lock:
            held, view.assignment = view.assignment, None
            generation = view.generation
            view.generation = NO_GENERATION
            view.lock.notify_all()
        if held is not None:
            ctx.record(Event.REVOKED, generation=generation, reason="leave", units=ctx.units(held))
        # Tell the leader nothing of ours needs fencing, then go: a rebalance follows.
        try:
            ctx.update(self._release)
        except CoordinationError as exc:
            log.info("could not release before leaving; the leader waits out the session", extra={"error": str(exc)})

    def _release(self, state: GroupState) -> GroupState | None:
        me = self._ctx.member_id
        if me not in state.holders:
            return None
        return state.evolve(holders=state.holders - {me})

    def _prepare(self, generation: int, held: bool, next_generation: int) -> None:
        ctx, view = self._ctx, self._view
        ctx.record(Event.REBALANCE_STARTED, generation=next_generation)
        ctx.callback("on_join_prepare", ctx.protocol.on_join_prepare, generation, ctx.member_id)
        self._prepared = next_generation
        if not ctx.cooperative:
            with view.lock:
                released, view.assignment = view.assignment, None
                view.lock.notify_all()
            if held and released is not None:
                ctx.record(Event.REVOKED, generation=generation, reason="rebalance", units=ctx.units(released))

    def _join_generation(self, generation: int) -> bool:
        ctx = self._ctx
        protocols = check_protocols(ctx.protocol.metadata())
        me, cooperative = ctx.member_id, ctx.cooperative

        def join(s: GroupState) -> GroupState | None:
            if s.generation != generation or s.phase != REBALANCING:
                return None
            if me in s.joined and (me not in s.members or s.members[me] == protocols):
                return None  # already joined (a write reported as failed may have applied)
            members = dict(s.members)
            if me in members:
                members[me] = protocols
            holders = s.holders - {me} if not cooperative else s.holders
            return s.evolve(members=members, joined=s.joined | {me}, holders=holders, excluded=s.excluded - {me})

        wrote = ctx.update(join)
        with self._view.lock:
            latest = self._view.latest
        if wrote or (latest is not None and me in latest.joined and latest.generation == generation):
            self._joined_generation = generation
        return wrote

    def _complete(self, state: GroupState) -> None:
        ctx, view = self._ctx, self._view
        assignment = state.assignment.get(ctx.member_id, b"")
        protocol = state.protocol or ""
        with view.lock:
            before = view.assignment
        if ctx.cooperative and before is not None:
            # KIP-429: what the new generation takes away is revoked first (logged first).
            gone = [u for u in ctx.units(before) or [] if u not in set(ctx.units(assignment) or [])]
            if gone:
                ctx.record(Event.REVOKED, generation=view.generation, reason="rebalance", units=gone)
        ctx.callback(
            "on_join_complete", ctx.protocol.on_join_complete, state.generation, ctx.member_id, protocol, assignment
        )
        with view.lock:
            view.generation = state.generation
            view.assignment = assignment
            view.protocol_name = state.protocol
            view.lock.notify_all()
        ctx.record(Event.ASSIGNED, generation=state.generation, protocol=protocol, units=ctx.units(assignment))

    def _lose(self, generation: int) -> None:
        ctx, view = self._ctx, self._view
        with view.lock:
            held = view.assignment
        ctx.callback("on_lost", ctx.protocol.on_lost, generation, ctx.member_id)
        with view.lock:
            view.assignment = None
            view.generation = NO_GENERATION
            view.lock.notify_all()
        ctx.record(Event.REVOKED, generation=generation, reason="lost", units=ctx.units(held))
