"""The group coordinator's record: its layout, where it lives, and members' join data.

Written by the group coordinator's leader (kubecoord.group_coordinator, or the operator
with spec.assignment) and read by every member, the operator's Group status and
``kubecoord group describe`` (Coordinator.describe_group()). The record is one key,
STATE_KEY, of the store ``derived_name(GROUP)``, whose leader election has the same name.

Format 1, JSON (bytes as base64)::

    {"format": 1, "generation": 7, "phase": "rebalancing" | "stable",
     "protocol_type": "units", "leader": "w1", "leader_epoch": 3,
     "members":  {"w1": [["sticky", "<b64>"], ...], ...},  # this generation's members
     "joined":   ["w1", ...],    # members that ran on_join_prepare for this generation
     "holders":  ["w2", ...],    # may still act on units of an earlier generation
     "excluded": ["w9"],         # live, but dropped for missing the rebalance timeout
     "protocol": "sticky", "assignment": {"w1": "<b64>", ...}, "rejoin": false,
     "started": 1764000000.5,    # wall time the rebalance started (for durations)
     "assigned_by": "operator"}  # optional: the operator assigns (KIP-848), not a member

A member's membership data (at join) is JSON ``{"t": protocol_type, "p": [[name, "<b64>"], ...]}``.

Guarantees: a record of another format raises GroupProtocolError rather than being
misread; encode_state(decode_state(text)) keeps every field. How the record is written
(compare-and-set only) is the group coordinator's (group_coordinator/record.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from kubecoord.errors import GroupProtocolError
from kubecoord.wire import json_text

FORMAT = 1
STATE_KEY = "coordinator/state"
REBALANCING = "rebalancing"
STABLE = "stable"

Protocols = tuple[tuple[str, bytes], ...]
"""A member's supported protocols, most preferred first, each with its metadata."""


@dataclass(frozen=True)
class GroupState:
    generation: int
    phase: str
    protocol_type: str
    leader: str | None = None
    leader_epoch: int = 0
    members: dict[str, Protocols] = field(default_factory=dict)
    joined: frozenset[str] = frozenset()
    holders: frozenset[str] = frozenset()
    excluded: frozenset[str] = frozenset()
    protocol: str | None = None
    assignment: dict[str, bytes] = field(default_factory=dict)
    rejoin: bool = False
    started: float = 0.0
    assigned_by: str | None = None
    """None: the elected member leads; "operator": the kubecoord operator does (spec.assignment)."""

    def evolve(self, **changes: Any) -> GroupState:
        return replace(self, **changes)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def encode_state(state: GroupState) -> str:
    return json.dumps(
        {
            "format": FORMAT,
            "generation": state.generation,
            "phase": state.phase,
            "protocol_type": state.protocol_type,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "members": {
                m: [[name, _b64(meta)] for name, meta in protos] for m, protos in sorted(state.members.items())
            },
            "joined": sorted(state.joined),
            "holders": sorted(state.holders),
            "excluded": sorted(state.excluded),
            "protocol": state.protocol,
            "assignment": {m: _b64(a) for m, a in sorted(state.assignment.items())},
            "rejoin": state.rejoin,
            "started": state.started,
            **({"assigned_by": state.assigned_by} if state.assigned_by else {}),
        },
        separators=(",", ":"),
    )


def decode_state(text: str) -> GroupState:
    try:
        raw = json_text.loads(text)
        if raw.get("format") != FORMAT:
            raise GroupProtocolError(f"group state has format {raw.get('format')!r}; this client reads {FORMAT}")
        return GroupState(
            generation=int(raw["generation"]),
            phase=str(raw["phase"]),
            protocol_type=str(raw["protocol_type"]),
            leader=raw.get("leader"),
            leader_epoch=int(raw.get("leader_epoch", 0)),
            members={
                m: tuple((str(name), _unb64(meta)) for name, meta in protos) for m, protos in raw["members"].items()
            },
            joined=frozenset(raw.get("joined", ())),
            holders=frozenset(raw.get("holders", ())),
            excluded=frozenset(raw.get("excluded", ())),
            protocol=raw.get("protocol"),
            assignment={m: _unb64(a) for m, a in raw.get("assignment", {}).items()},
            rejoin=bool(raw.get("rejoin", False)),
            started=float(raw.get("started", 0.0)),
            assigned_by=raw.get("assigned_by"),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GroupProtocolError(f"group state record is malformed: {exc}") from None


def encode_join_data(protocol_type: str, protocols: Protocols) -> str:
    """A member's membership data: its protocol type and protocols (at join time)."""
    encoded = [[name, _b64(meta)] for name, meta in protocols]
    return json.dumps({"t": protocol_type, "p": encoded}, separators=(",", ":"))


def decode_join_data(text: str) -> tuple[str, Protocols] | None:
    """(protocol_type, protocols) of a member's data, or None if it is not a well-formed
    coordinator member's: any member can write any data, so every type is checked — one
    member's malformed data excludes that member, never breaks the leader reading it."""
    try:
        raw = json_text.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("t"), str) or not isinstance(raw.get("p"), list):
        return None
    protocols: list[tuple[str, bytes]] = []
    for item in raw["p"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and item[0]
                and isinstance(item[1], str)):
            return None
        try:
            protocols.append((item[0], _unb64(item[1])))
        except ValueError:  # binascii.Error, and non-ASCII text
            return None
    return (raw["t"], tuple(protocols)) if protocols else None


def derived_name(group: str, suffix: str = "gc") -> str:
    """The election and store name of ``group``'s coordinator: ``GROUP-gc``, shortened
    with a hash when that would pass 63 characters (still a DNS-1123 label)."""
    name = f"{group}-{suffix}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(group.encode()).hexdigest()[:10]
    return f"{group[: 63 - len(suffix) - 12].rstrip('-')}-{digest}-{suffix}"
