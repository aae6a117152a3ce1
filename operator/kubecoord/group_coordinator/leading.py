"""The group leader's decisions: when to start a generation, when to assign it.

A pure function of the published record, the live membership and the leader's local
timers, so the rules can be read (and tested) in one place:

1. A new generation starts (phase "rebalancing") whenever the live members (less the
   excluded) differ from the generation's members, or a member asked to rejoin.
2. A generation is assigned (phase "stable") once every member joined it (ran
   on_join_prepare and re-sent its metadata) AND every holder of earlier units that is
   not a member any more is fenced: ``session_timeout`` has passed on the leader's
   clock since it saw a record without that member. By then the departed member has
   either read such a record (and stopped) or failed to confirm the state for a whole
   session timeout (and fenced itself: its ensure_generation() fails).
3. Members that have not joined ``rebalance_timeout`` after the generation started are
   excluded (they stay holders, so rule 2 fences them) until they join again.
4. A member whose metadata in the record (what it wrote when it joined, which may
   differ from what it joined the membership with) is not ``readable`` is left out of
   the assignment: the others are assigned without it and it is assigned nothing
   (empty bytes), so one member nobody can read never keeps the group unassigned.

Not decided here: the assignment itself (the protocol's perform_assignment()).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubecoord.group_coordinator.record import select_protocol
from kubecoord.wire.group_record import REBALANCING, STABLE, GroupState, Protocols

Assign = Callable[[str, dict[str, bytes]], dict[str, bytes]]
"""(protocol, member id -> that protocol's metadata) -> member id -> assignment."""


@dataclass
class LeaderTimers:
    """What the leader measured itself (on its monotonic clock); lost on failover, when
    the next leader starts measuring afresh (so waits only get longer)."""

    fence_since: dict[str, float] = field(default_factory=dict)
    rebalance_since: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    state: GroupState | None
    """The record to write by compare-and-set, or None when nothing is due."""
    kind: str = ""
    """"rebalance", "complete" or "leader"."""
    wake_in: float | None = None
    """Seconds until a timer may change the decision."""


def decide(
    state: GroupState,
    live: dict[str, Protocols],
    *,
    leader_id: str,
    epoch: int,
    now: float,
    wall: float,
    timers: LeaderTimers,
    session_timeout: float,
    rebalance_timeout: float,
    assign: Assign,
    choose: Callable[[dict[str, Protocols]], str] = select_protocol,
    readable: Callable[[Protocols], bool] = lambda _protocols: True,
) -> Decision:
    members = set(state.members)
    for holder in members & timers.fence_since.keys():
        del timers.fence_since[holder]
    departed = state.holders - members
    for holder in departed:
        timers.fence_since.setdefault(holder, now)
    fenced = {h for h in departed if now - timers.fence_since[h] >= session_timeout}
    waits = [timers.fence_since[h] + session_timeout - now for h in departed - fenced]

    for old in [g for g in timers.rebalance_since if g < state.generation]:
        del timers.rebalance_since[old]
    excluded = state.excluded & live.keys()
    desired = live.keys() - excluded
    lead = {"leader": leader_id, "leader_epoch": epoch}

    if state.phase == REBALANCING and desired == members and not state.rejoin:
        since = timers.rebalance_since.setdefault(state.generation, now)
        laggards = members - state.joined
        if laggards and now - since >= rebalance_timeout:
            excluded |= laggards
            desired -= laggards
        elif laggards:
            waits.append(since + rebalance_timeout - now)

    if desired != members or state.rejoin:
        new_members = {m: state.members.get(m) or live[m] for m in sorted(desired)}
        started = state.started if state.phase == REBALANCING else wall
        return Decision(
            state.evolve(
                generation=state.generation + 1, phase=REBALANCING, members=new_members, joined=frozenset(),
                holders=state.holders - fenced, excluded=frozenset(excluded), rejoin=False, started=started, **lead,
            ),
            "rebalance",
        )

    if state.phase == REBALANCING:
        if state.joined >= members and departed <= fenced:
            protocol, assignment = _assign(state.members, assign, choose, readable)
            return Decision(
                state.evolve(
                    phase=STABLE, protocol=protocol, assignment=assignment, holders=frozenset(members), **lead
                ),
                "complete",
            )
        return Decision(None, wake_in=max(0.0, min(waits)) if waits else None)

    if state.leader != leader_id or state.leader_epoch != epoch:
        return Decision(state.evolve(**lead), "leader")
    return Decision(None)


def _assign(
    members: dict[str, Protocols], assign: Assign, choose: Callable[[dict[str, Protocols]], str],
    readable: Callable[[Protocols], bool],
) -> tuple[str | None, dict[str, bytes]]:
    if not members:
        return None, {}
    protocol = choose(members)
    # Rule 4: the protocol was chosen over every member (it is a generation's), the
    # assignment is computed over the readable ones only.
    read = {m: protos for m, protos in members.items() if readable(protos)}
    # A server-side choice may be a protocol a member did not list: it gets its first one's metadata.
    metadata = {m: dict(protos).get(protocol, protos[0][1]) for m, protos in read.items()}
    result = assign(protocol, metadata) if metadata else {}
    return protocol, {m: result.get(m, b"") for m in members}
