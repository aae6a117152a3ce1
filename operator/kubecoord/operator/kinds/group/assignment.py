"""Group coordinator status and operator-computed assignment (KIP-848's server side).

Every Group whose members use ``coord.group_coordinator(...)`` has a generation record
(kubecoord.wire.group_record). This module reads it for the Group's status — generation,
phase, protocol, leader and each member's units — and posts RebalanceStarted /
RebalanceCompleted Events when the generation or phase changes.

With ``spec.assignment`` (``{units: 64, assignor: sticky}``) the operator itself is the
group leader: it marks the record ``assigned_by: operator`` (members then never lead),
applies the leader rules of kubecoord.group_coordinator (decide) on the live membership and
computes the assignment with the spec's assignor. Whatever the members' rebalance
protocol, a unit another member still reports owning is withheld (the cooperative
rule), so an eager or a cooperative member is safe under either assignor. Members must
use kubecoord.group_coordinator.UnitsProtocol (protocol type ``units``): the operator reads
their owned units from its metadata.

Guarantees: the same as member-led groups (the record is written by compare-and-set
only; departed holders are fenced for sessionTimeoutSeconds before their units move).
Not guaranteed: a rebalance while the operator is down (a standby takes over; the
members keep their units meanwhile).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubecoord.api import Coordinator, GroupDescription
from kubecoord.errors import GroupProtocolError
from kubecoord.group_coordinator import (
    ASSIGNORS,
    Decision,
    LeaderTimers,
    decide,
    decode_subscription,
    decode_units,
    encode_units,
    publish,
    withhold_owned,
)
from kubecoord.operator.kinds.group.status import GroupMirror
from kubecoord.operator.mirror import Notice, Snapshot
from kubecoord.timings import DEFAULT_GROUP_SESSION_TIMEOUT, DEFAULT_REBALANCE_TIMEOUT
from kubecoord.wire.group_record import (
    REBALANCING,
    STABLE,
    STATE_KEY,
    GroupState,
    Protocols,
    decode_join_data,
    decode_state,
    derived_name,
)

log = logging.getLogger("kubecoord.operator")

OPERATOR_ID = "kubecoord-operator"
UNITS_PROTOCOL_TYPE = "units"


@dataclass(frozen=True)
class AssignmentSpec:
    """spec.assignment of a Group, as the CRD admits it (validated and defaulted)."""

    units: tuple[str, ...]
    assignor: str = "sticky"
    session_timeout: float = DEFAULT_GROUP_SESSION_TIMEOUT
    rebalance_timeout: float = DEFAULT_REBALANCE_TIMEOUT

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> AssignmentSpec | None:
        raw = spec.get("assignment")
        if not raw:
            return None
        names = raw.get("unitNames")
        units = tuple(str(u) for u in names) if names else tuple(str(i) for i in range(int(raw.get("units", 0))))
        return cls(
            units=units,
            assignor=str(raw.get("assignor", "sticky")),
            session_timeout=float(raw.get("sessionTimeoutSeconds", DEFAULT_GROUP_SESSION_TIMEOUT)),
            rebalance_timeout=float(raw.get("rebalanceTimeoutSeconds", DEFAULT_REBALANCE_TIMEOUT)),
        )


def _readable(protocols: Protocols, spec: AssignmentSpec) -> bool:
    """Whether the member's metadata for the protocol the operator uses can be read."""
    if not protocols:
        return False
    metadata = dict(protocols).get(spec.assignor, protocols[0][1])  # as kubecoord.group_coordinator.leading picks it
    try:
        decode_subscription(metadata, spec.units)
    except GroupProtocolError:
        return False
    return True


def assign_units(spec: AssignmentSpec, metadata: dict[str, bytes]) -> dict[str, bytes]:
    """The spec's assignor over the members' reported ownership, then the cooperative
    rule: nothing goes to a member while another reports owning it."""
    subscriptions = {member: decode_subscription(data, spec.units) for member, data in metadata.items()}
    target = ASSIGNORS[spec.assignor]().assign(list(spec.units), subscriptions)
    # Cooperative members keep units through a rebalance whatever the assignor: what
    # another member still owns follows in the next generation, as in KIP-429.
    safe = withhold_owned(target, subscriptions)
    return {member: encode_units(safe.get(member, []), universe=spec.units) for member in metadata}


class GroupCoordinatorView:
    """Reads (and with spec.assignment, drives) one group's generation record."""

    def __init__(
        self, coordinator: Coordinator, group: str, spec: AssignmentSpec | None, wake: Callable[[], None]
    ) -> None:
        self.group = group
        self.spec = spec
        self._wake = wake
        name = derived_name(group)
        self._store = coordinator.storage(name)
        self._registry = coordinator.listener_registry(name)
        self._registry.add_value_change_listener(STATE_KEY, self._poke)
        self._membership = coordinator.group_membership(group) if spec is not None else None
        self._timers = LeaderTimers()
        self._timer: threading.Timer | None = None
        self._notices = RebalanceNotices()
        self._excluded: set[str] = set()

    def _poke(self, *_: Any) -> None:
        self._wake()

    def step(self) -> tuple[GroupState | None, list[Notice]]:
        """Assign if this group is the operator's to assign; return the record and the
        Events that describe what changed since the previous step."""
        state: GroupState | None = None
        for _ in range(20):
            versioned = self._store.fetch_versioned(STATE_KEY).result()
            state = decode_state(versioned.value) if versioned is not None else None
            version = None if versioned is None else versioned.version
            if self.spec is None:
                if state is not None and state.assigned_by is not None:
                    # spec.assignment is gone (the Group was re-created without it): hand the
                    # group back to its members, or nobody would ever assign it again.
                    publish(self._store, state.evolve(assigned_by=None), version)
                    continue
                break
            if not self._lead(state, version):
                break
        return state, self._notices(state)

    def _lead(self, state: GroupState | None, version: int | None) -> bool:
        """One leader step; True when a write happened (read again)."""
        assert self.spec is not None and self._membership is not None
        spec = self.spec
        live: dict[str, Protocols] = {}
        for member, data in self._membership.membership().items():
            decoded = decode_join_data(data)
            if decoded is None or decoded[0] != UNITS_PROTOCOL_TYPE:
                continue
            if not _readable(decoded[1], spec):
                # One member's unreadable metadata must not keep the whole group unassigned:
                # it is left out (as a member of another protocol would be) and told once.
                if member not in self._excluded:
                    self._excluded.add(member)
                    log.warning("member with malformed units metadata left out of the assignment",
                                extra={"group": self.group, "member": member})
                continue
            self._excluded.discard(member)
            live[member] = decoded[1]
        base = state or GroupState(generation=0, phase=STABLE, protocol_type=UNITS_PROTOCOL_TYPE)
        takeover = base.assigned_by != "operator"
        base = base.evolve(assigned_by="operator")
        now = time.monotonic()
        decision = decide(
            base, live, leader_id=OPERATOR_ID, epoch=base.leader_epoch, now=now, wall=time.time(),
            timers=self._timers, session_timeout=spec.session_timeout, rebalance_timeout=spec.rebalance_timeout,
            assign=lambda _protocol, metadata: assign_units(spec, metadata), choose=lambda _members: spec.assignor,
            # The metadata a member wrote into the record when it joined the generation
            # (its metadata(), not its membership data) is read by the same rule.
            readable=lambda protocols: _readable(protocols, spec),
        )
        if decision.state is None and takeover:
            decision = Decision(base, "leader")
        self._schedule(decision.wake_in)
        if decision.state is None:
            return False
        publish(self._store, decision.state, version)
        return True  # written, or someone wrote first: read again either way

    def _schedule(self, delay: float | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if delay is not None:
            self._timer = threading.Timer(delay + 0.01, self._wake)
            self._timer.daemon = True
            self._timer.start()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._registry.remove_value_change_listener(STATE_KEY, self._poke)
        self._registry.close()
        self._store.close()
        if self._membership is not None:
            self._membership.close()


class RebalanceNotices:
    """The RebalanceStarted / RebalanceCompleted Events of a group's record, once per change."""

    def __init__(self) -> None:
        self._seen: tuple[int, str] | None = None

    def __call__(self, state: GroupState | None) -> list[Notice]:
        if state is None:
            return []
        seen, self._seen = self._seen, (state.generation, state.phase)
        if seen == self._seen or state.generation == 0:
            return []
        by = "the operator" if state.assigned_by else f"leader {state.leader}"
        if state.phase == REBALANCING:
            members = ", ".join(sorted(state.members)) or "none"
            return [Notice("Normal", "RebalanceStarted", f"generation {state.generation} forming; members: {members}")]
        if seen is None or seen[0] < state.generation or seen[1] != STABLE:
            return [Notice("Normal", "RebalanceCompleted",
                           f"generation {state.generation} assigned by {by} with {state.protocol}")]
        return []


def status_fields(
    state: GroupDescription | None, members: dict[str, str], unit_list: Sequence[str] | None = None
) -> dict[str, Any]:
    """The Group status fields a generation record adds (as Coordinator.describe_group()
    shows it): generation, phase, protocol, leader, assignedBy, and units / unitCount on
    each member entry. ``unit_list`` (spec.assignment's units) reads compact assignments."""
    if state is None:
        return {}
    units: dict[str, list[str]] = {}
    for member, data in state.assignment.items():
        if state.protocol_type == UNITS_PROTOCOL_TYPE:
            try:
                units[member] = decode_units(data, unit_list)[0]
            except GroupProtocolError:
                continue
    entries = []
    for member in sorted(members):
        entry: dict[str, Any] = {"id": member, "data": members[member]}
        if state.phase == STABLE and member in units:
            entry["units"] = units[member]
            entry["unitCount"] = len(units[member])
        entries.append(entry)
    return {
        "members": entries,
        "generation": state.generation,
        "phase": "Stable" if state.phase == STABLE else "Rebalancing",
        "protocol": state.protocol,
        "leader": OPERATOR_ID if state.assigned_by else state.leader,
        "assignedBy": "operator" if state.assigned_by else "members",
    }


def add_record(snapshot: Snapshot, group: str, state: GroupState | None, notices: list[Notice],
               unit_list: Sequence[str] | None) -> None:
    """Fold the group coordinator's record into a membership snapshot."""
    members = {entry["id"]: entry.get("data", "") for entry in snapshot.status["members"]}
    described = None if state is None else GroupDescription.of(group, state)
    snapshot.status.update(status_fields(described, members, unit_list))
    snapshot.notices.extend(notices)


class CoordinatedGroupMirror(GroupMirror):
    """The Group status mirror plus the generation record (and, with spec.assignment,
    the operator's leader step). Driven by the mirror's wake like the membership."""

    def __init__(
        self, coord: Coordinator, body: dict[str, Any], wake: Callable[[], None]
    ) -> None:
        name = body["metadata"]["name"]
        super().__init__(coord, name, dict(body.get("status") or {}), wake)
        self._view = GroupCoordinatorView(coord, name, AssignmentSpec.from_spec(dict(body.get("spec") or {})), wake)

    def _snapshot(self) -> Snapshot:
        snapshot = super()._snapshot()
        state, notices = self._view.step()
        spec = self._view.spec
        add_record(snapshot, self._view.group, state, notices, spec.units if spec is not None else None)
        return snapshot

    def close(self) -> None:
        self._view.close()
        super().close()
