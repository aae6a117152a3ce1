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
agree on its partitions).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence

from kubecoord.api import GroupProtocol, RebalanceProtocol
from kubecoord.errors import GroupProtocolError, InvalidArgumentError
from kubecoord.group_coordinator.assignors import ASSIGNORS, Assignor, StickyAssignor, Subscription

log = logging.getLogger("kubecoord.coordinator")

UnitsCallback = Callable[[list[str]], None]


def encode_units(units: Sequence[str], generation: int = -1, previous: Sequence[str] = ()) -> bytes:
    fields: dict[str, object] = {"units": list(units), "generation": generation}
    if previous:
        fields["previous"] = list(previous)
    return json.dumps(fields, separators=(",", ":")).encode()


def decode_units(data: bytes) -> tuple[list[str], int]:
    """(units, generation) of an assignment or of a member's metadata."""
    subscription = decode_subscription(data)
    return list(subscription.owned), subscription.generation


def decode_subscription(data: bytes) -> Subscription:
    """A member's metadata: the units it owns, since which generation, and what it held
    before an eager revocation (for stickiness)."""
    if not data:
        return Subscription()
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise GroupProtocolError(f"malformed units metadata: {exc}") from None
    if not isinstance(raw, dict):
        raise GroupProtocolError("malformed units metadata: not an object")
    units, generation, previous = _names(raw.get("units")), raw.get("generation", -1), _names(raw.get("previous", []))
    if units is None or previous is None or isinstance(generation, bool) or not isinstance(generation, int):
        raise GroupProtocolError("malformed units metadata: units and previous must be lists of names, "
                                 "generation an integer")
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
            data = encode_units(self._owned, self._generation, self._previous)
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
        subscriptions = {member: decode_subscription(data) for member, data in members_metadata.items()}
        result = assignor.assign(self.units, subscriptions)
        return {member: encode_units(result.get(member, [])) for member in members_metadata}

    def on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        assigned, _ = decode_units(assignment)
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
        return decode_units(assignment)[0]

    def accepts_metadata(self, protocol: str, metadata: bytes) -> bool:
        try:
            decode_subscription(metadata)
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
