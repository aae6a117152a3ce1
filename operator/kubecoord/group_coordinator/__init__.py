"""The group coordinator of KIP-795, written once over the KIP-30 primitives.

Members register with metadata, one member leads, the leader computes an assignment,
every member receives its share with a generation number, and any membership change
starts a rebalance — on every backend, because it uses only group membership, leader
election, a compare-and-set KV record and listeners (see member.py for the layout).

Belongs here, a module a job: the member handle (member.py) and what its parts share
(context.py: the record's compare-and-set, callbacks, events; view.py: what the member
knows, under one lock), its worker thread (worker.py), the member's side of a rebalance
(following.py), the leader's duties (leader_duties.py) and rules (leading.py), joining
the membership again after an expiry (rejoin.py), the generation record (record.py),
assignors (assignors.py) and the units protocol that applies them (units.py).
Not here: backend code (this package imports no backend), the operator's server-side
assignment (kubecoord.operator), analytics, the record's layout (kubecoord.wire.group_record).

Public: what this package's ``__all__`` names. Besides the member and the assignors, the
leader's rules (``decide`` with its ``LeaderTimers`` and ``Decision``), the record's
compare-and-set ``publish`` and ``withhold_owned`` (KIP-429's rule) are public for a
server-side leader such as the operator's (KIP-848); the other modules are private.

Usage::

    from kubecoord.group_coordinator import UnitsProtocol

    with kubecoord.connect("memory://demo") as coord:
        member = coord.group_coordinator("workers", UnitsProtocol([f"p{i}" for i in range(64)]))
        member.join(timeout=30)
"""

from kubecoord.group_coordinator.assignors import (
    ASSIGNORS,
    Assignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    minimum_moves,
    moved,
    withhold_owned,
)
from kubecoord.group_coordinator.leading import Decision, LeaderTimers, decide
from kubecoord.group_coordinator.member import GroupMember
from kubecoord.group_coordinator.record import publish
from kubecoord.group_coordinator.units import UnitsProtocol, decode_subscription, decode_units, encode_units

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "Decision",
    "GroupMember",
    "LeaderTimers",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "UnitsProtocol",
    "decide",
    "decode_subscription",
    "decode_units",
    "encode_units",
    "minimum_moves",
    "moved",
    "publish",
    "withhold_owned",
]
