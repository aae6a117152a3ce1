"""UnitsProtocol: share a list of units (partitions, shards, tasks) through assignors.

Usage::

    def start(units): ...          # begin work on these units
    def stop(units): ...           # stop work on them (commit, flush)

    protocol = UnitsProtocol([f"p{i}" for i in range(64)], on_assigned=start, on_revoked=stop)
    member = coord.group_coordinator("workers", protocol, member_id="w1")
    member.join(timeout=30)

What Kafka's ConsumerCoordinator does above the AbstractCoordinator, for plain unit
names: the metadata of each assignor is the units this member owns (and the generation
it got them in); the leader runs the chosen assignor; on_revoked/on_assigned receive
only the difference. With eager assignors (range, roundrobin, sticky) every unit is
revoked when a rebalance starts; with ``cooperative-sticky`` (KIP-429) nothing is revoked
then, only the units taken away when the new generation arrives, after which the member
asks for the follow-up rebalance that hands them on. ``on_lost`` (default: on_revoked)
is called when the member learns it was dropped from the group with units in hand.

The units list is the leader's: members should agree on it (as consumers of a topic
agree on its partitions). Encoding: a list of at most COMPACT_ABOVE (32 KiB) as JSON
travels as names; a larger one as runs of indexes into the list ("0-1364,4000"), tagged
with the list's length and a SHA-256 prefix, so metadata and assignments stay small
whatever the names' length (4,096 units of 100 characters: 113 bytes of member data
owning all of them, about 13 KB at worst, owning every other unit). Indexes written
against another list are refused with GroupProtocolError (the member is excluded by
the leader, or its assignment refused), never read as the wrong names: members of a
large group must share one unit list, in the same order.

What a member joins the membership with (join_metadata) names no unit: each assignor
with the metadata of a member owning nothing, ~60 bytes, so joining again after the
membership lost the member (a deleted or expired member Lease) succeeds whatever it
owns; the owned units travel in the group's record when it joins the next generation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence

from kubecoord.api import GroupProtocol, RebalanceProtocol
from kubecoord.errors import GroupProtocolError, InvalidArgumentError
from kubecoord.group_coordinator.assignors import ASSIGNORS, Assignor, StickyAssignor, Subscription

log = logging.getLogger("kubecoord.coordinator")

UnitsCallback = Callable[[list[str]], None]


COMPACT_ABOVE = 32 * 1024
"""Bytes of the whole unit list (as JSON) above which units travel as indexes, not names."""


def universe_digest(universe: Sequence[str]) -> str:
    """The unit list's identity in a compact encoding: its length and a hash of it."""
    text = json.dumps(list(universe), separators=(",", ":"))
    return f"{len(universe)}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _compact(universe: Sequence[str] | None) -> bool:
    if universe is None:
        return False
    return len(json.dumps(list(universe), separators=(",", ":")).encode()) > COMPACT_ABOVE


def _ranges(units: Sequence[str], universe: Sequence[str]) -> str:
    """``units`` as sorted runs of indexes into ``universe``: "0-99,105,200-204"."""
    index = {name: i for i, name in enumerate(universe)}
    try:
        positions = sorted(index[u] for u in units)
    except KeyError as exc:
        raise GroupProtocolError(f"unit {exc.args[0]!r} is not in the unit list") from None
    runs: list[str] = []
    start = prev = -2
    for i in [*positions, -2]:
        if i == prev + 1:
            prev = i
            continue
        if start >= 0:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    return ",".join(runs)


def _unranges(text: object, universe: Sequence[str]) -> tuple[str, ...] | None:
    """The names of a runs string, or None if it is malformed (out of range, overlapping)."""
    if not isinstance(text, str) or len(text) > 16 * (len(universe) + 1):
        return None
    if not text:
        return ()
    names: list[str] = []
    last = -1
    for run in text.split(","):
        first, dash, end = run.partition("-")
        if not (first.isdigit() and (end.isdigit() if dash else True)):
            return None
        lo, hi = int(first), int(end or first)
        if lo <= last or hi < lo or hi >= len(universe):
            return None
        names.extend(universe[lo : hi + 1])
        last = hi
    return tuple(names)


def encode_units(
    units: Sequence[str], generation: int = -1, previous: Sequence[str] = (), *, universe: Sequence[str] | None = None
) -> bytes:
    """An assignment or a member's metadata. With ``universe`` (the protocol's whole unit
    list) larger than COMPACT_ABOVE bytes, units are written as runs of indexes into it,
    tagged with the list's digest, so the size does not grow with the names' length."""
    fields: dict[str, object]
    if _compact(universe):
        assert universe is not None
        fields = {"of": universe_digest(universe), "u": _ranges(units, universe), "generation": generation}
        if previous:
            fields["p"] = _ranges(previous, universe)
    else:
        fields = {"units": list(units), "generation": generation}
        if previous:
            fields["previous"] = list(previous)
    return json.dumps(fields, separators=(",", ":")).encode()


def decode_units(data: bytes, universe: Sequence[str] | None = None) -> tuple[list[str], int]:
    """(units, generation) of an assignment or of a member's metadata; ``universe`` (the
    unit list) is needed to read the compact form, see encode_units."""
    subscription = decode_subscription(data, universe)
    return list(subscription.owned), subscription.generation


def decode_subscription(data: bytes, universe: Sequence[str] | None = None) -> Subscription:
    """A member's metadata: the units it owns, since which generation, and what it held
    before an eager revocation (for stickiness). The compact form (indexes) is read
    against ``universe`` and refused (GroupProtocolError) when written against another
    unit list: an index is never read as the wrong name."""
    if not data:
        return Subscription()
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise GroupProtocolError(f"malformed units metadata: {exc}") from None
    if not isinstance(raw, dict):
        raise GroupProtocolError("malformed units metadata: not an object")
    generation = raw.get("generation", -1)
    if "of" in raw:
        if universe is None:
            raise GroupProtocolError("units metadata is compact (unit indexes): the unit list is needed to read it")
        if raw["of"] != universe_digest(universe):
            raise GroupProtocolError(f"units metadata indexes another unit list ({raw['of']!r}; this one is "
                                     f"{universe_digest(universe)!r}): members must share one unit list")
        units, previous = _unranges(raw.get("u"), universe), _unranges(raw.get("p", ""), universe)
    else:
        units, previous = _names(raw.get("units")), _names(raw.get("previous", []))
    if units is None or previous is None or isinstance(generation, bool) or not isinstance(generation, int):
        raise GroupProtocolError("malformed units metadata: units and previous must be lists of names "
                                 "(or runs of indexes), generation an integer")
    return Subscription(units, generation, previous)


def _names(value: object) -> tuple[str, ...] | None:
    """``value`` as unit names if it is a list of strings, else None."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return tuple(value)


class UnitsProtocol(GroupProtocol):
    """A GroupProtocol over a list of unit names; see the module docstring."""

    def __init__(
        self,
        units: Sequence[str],
        *,
        assignors: Sequence[Assignor | str] = ("sticky",),
        on_assigned: UnitsCallback | None = None,
        on_revoked: UnitsCallback | None = None,
        on_lost: UnitsCallback | None = None,
        protocol_type: str = "units",
    ) -> None:
        if isinstance(units, str) or len(set(units)) != len(units):
            raise InvalidArgumentError("units must be a sequence of distinct names")
        resolved: list[Assignor] = []
        for assignor in assignors:
            if isinstance(assignor, str):
                if assignor not in ASSIGNORS:
                    raise InvalidArgumentError(f"unknown assignor {assignor!r}; known: {sorted(ASSIGNORS)}")
                assignor = ASSIGNORS[assignor]()
            resolved.append(assignor)
        if not resolved:
            raise InvalidArgumentError("at least one assignor is needed")
        kinds = {a.rebalance_protocol for a in resolved}
        if len(kinds) != 1:
            raise InvalidArgumentError("assignors of one member must all be eager or all cooperative")
        self.units = list(units)
        self.assignors = {a.name: a for a in resolved}
        self.protocol_type = protocol_type
        self.rebalance_protocol: RebalanceProtocol = kinds.pop()
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost or on_revoked
        self._lock = threading.Lock()
        self._owned: list[str] = []
        self._previous: list[str] = []
        self._generation = -1
        self._rejoin = False

    @property
    def owned(self) -> list[str]:
        with self._lock:
            return list(self._owned)

    @property
    def generation(self) -> int:
        """The generation of the owned units (-1 before the first)."""
        with self._lock:
            return self._generation

    def metadata(self) -> list[tuple[str, bytes]]:
        with self._lock:
            data = encode_units(self._owned, self._generation, self._previous, universe=self.units)
        return [(name, data) for name in self.assignors]

    def join_metadata(self) -> list[tuple[str, bytes]]:
        """What the member joins the membership with: each assignor with the metadata of a
        member that owns nothing (the unit list's digest in the compact form, so a member
        of another list is still refused at join), ~60 bytes each whatever it owns; its
        owned units reach the leader in the record, with metadata(), when it joins a
        generation."""
        data = encode_units((), universe=self.units)
        return [(name, data) for name in self.assignors]

    def on_join_prepare(self, generation: int, member_id: str) -> None:
        if self.rebalance_protocol == "cooperative":
            with self._lock:
                self._rejoin = False  # this is the rebalance that was asked for
            return  # KIP-429: keep working; revocations come with the new assignment
        with self._lock:
            if self._owned:
                self._previous = list(self._owned)  # remembered for the sticky assignor
        self._revoke_all(self._on_revoked)

    def perform_assignment(self, leader_id: str, protocol: str, members_metadata: dict[str, bytes]) -> dict[str, bytes]:
        assignor = self.assignors.get(protocol) or StickyAssignor()
        # The leader excluded members whose metadata accepts_metadata() refused.
        subscriptions = {member: decode_subscription(data, self.units) for member, data in members_metadata.items()}
        result = assignor.assign(self.units, subscriptions)
        return {member: encode_units(result.get(member, []), universe=self.units) for member in members_metadata}

    def on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        assigned, _ = decode_units(assignment, self.units)
        with self._lock:
            before = list(self._owned)
        revoked = [u for u in before if u not in set(assigned)]
        added = [u for u in assigned if u not in set(before)]
        if revoked:
            self._call(self._on_revoked, revoked)
        with self._lock:
            self._owned = list(assigned)
            self._previous = []
            self._generation = generation
            # KIP-429: what was taken away is handed on only in a follow-up rebalance.
            self._rejoin = self.rebalance_protocol == "cooperative" and bool(revoked)
        if added:
            self._call(self._on_assigned, added)

    def on_leave_prepare(self) -> None:
        self._revoke_all(self._on_revoked)

    def on_lost(self, generation: int, member_id: str) -> None:
        self._revoke_all(self._on_lost)

    def units_of(self, assignment: bytes) -> list[str]:
        """The units of an assignment of this protocol (for the event log)."""
        return decode_units(assignment, self.units)[0]

    def accepts_metadata(self, protocol: str, metadata: bytes) -> bool:
        try:
            decode_subscription(metadata, self.units)
        except GroupProtocolError:
            return False
        return True

    def rejoin_needed(self) -> bool:
        with self._lock:
            return self._rejoin

    def _revoke_all(self, callback: UnitsCallback | None) -> None:
        with self._lock:
            owned, self._owned = self._owned, []
        if owned:
            self._call(callback, owned)

    @staticmethod
    def _call(callback: UnitsCallback | None, units: list[str]) -> None:
        if callback is not None:
            callback(units)
