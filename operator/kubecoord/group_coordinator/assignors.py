"""Assignors: how a list of units (partitions, shards, tasks) is split among members.

Usage::

    RangeAssignor().assign(["p0", "p1", "p2"], {"a": Subscription(), "b": Subscription()})
    # {'a': ['p0', 'p1'], 'b': ['p2']}

Kafka's four, over plain unit names: ``range`` (contiguous runs, members in id order),
``roundrobin`` (units dealt in turn), ``sticky`` (balanced, and keeps as many units
where they are as balance allows: the fewest moves possible) and ``cooperative-sticky``
(sticky for KIP-429: a unit that must move is first taken from its owner and left
unassigned for one generation; it is given to its new member in the next one, once no
member reports owning it).

Every assignor gives each unit to at most one member and balances counts to within one.
Write your own by subclassing Assignor; ``minimum_moves`` is the least any balanced
assignment must move, the yardstick of bench/bench_coordinator.py.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubecoord.api import RebalanceProtocol


@dataclass(frozen=True)
class Subscription:
    """What a member reports at a rebalance: the units it owns now, and since when.

    ``previous``: what an eager member held before it gave everything up for this
    rebalance (Kafka's StickyAssignor user data): sticky assignors keep units there,
    but nobody works on them any more, so no one has to wait for their release.
    """

    owned: tuple[str, ...] = ()
    generation: int = -1
    previous: tuple[str, ...] = ()


Assignment = dict[str, list[str]]


class Assignor(abc.ABC):
    name: str
    rebalance_protocol: RebalanceProtocol = "eager"

    @abc.abstractmethod
    def assign(self, units: Sequence[str], members: Mapping[str, Subscription]) -> Assignment:
        """Every member id of ``members`` mapped to its units (possibly none)."""


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, units: Sequence[str], members: Mapping[str, Subscription]) -> Assignment:
        order = sorted(members)
        if not order:
            return {}
        base, extra = divmod(len(units), len(order))
        result: Assignment = {}
        start = 0
        for index, member in enumerate(order):
            count = base + (1 if index < extra else 0)
            result[member] = list(units[start : start + count])
            start += count
        return result


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, units: Sequence[str], members: Mapping[str, Subscription]) -> Assignment:
        order = sorted(members)
        result: Assignment = {member: [] for member in order}
        if not order:
            return result
        for index, unit in enumerate(units):
            result[order[index % len(order)]].append(unit)
        return result


def _claims(units: Sequence[str], members: Mapping[str, Subscription]) -> dict[str, str]:
    """unit -> the member that owns it; a unit claimed twice goes to the newer generation
    (ties: the lower id), units no longer in the list are dropped."""
    valid = set(units)
    owner: dict[str, tuple[int, str]] = {}
    for member in sorted(members):
        sub = members[member]
        for unit in sub.owned or sub.previous:
            if unit in valid and (unit not in owner or sub.generation > owner[unit][0]):
                owner[unit] = (sub.generation, member)
    return {unit: member for unit, (_, member) in owner.items()}


def _caps(counts: Mapping[str, int], total: int) -> dict[str, int]:
    """Balanced quotas (floor or floor+1) with the +1s given to the members owning most,
    which maximises what can stay in place."""
    order = sorted(counts, key=lambda m: (-counts[m], m))
    if not order:
        return {}
    base, extra = divmod(total, len(order))
    return {member: base + (1 if index < extra else 0) for index, member in enumerate(order)}


def minimum_moves(units: Sequence[str], members: Mapping[str, Subscription]) -> int:
    """The fewest units any balanced assignment must give to a member that does not own them."""
    owners = _claims(units, members)
    counts = {m: sum(1 for o in owners.values() if o == m) for m in members}
    caps = _caps(counts, len(units))
    return len(units) - sum(min(counts[m], caps[m]) for m in members)


def moved(before: Mapping[str, Sequence[str]], after: Mapping[str, Sequence[str]]) -> int:
    """How many units ``after`` gives to a member that did not have them in ``before``."""
    return sum(1 for member, got in after.items() for unit in got if unit not in set(before.get(member, ())))


class StickyAssignor(Assignor):
    name = "sticky"

    def assign(self, units: Sequence[str], members: Mapping[str, Subscription]) -> Assignment:
        if not members:
            return {}
        owners = _claims(units, members)
        owned: dict[str, list[str]] = {m: [] for m in members}
        for unit in units:  # keep unit order within each member
            if unit in owners:
                owned[owners[unit]].append(unit)
        caps = _caps({m: len(u) for m, u in owned.items()}, len(units))
        result: Assignment = {m: owned[m][: caps[m]] for m in sorted(members)}
        kept = {unit for got in result.values() for unit in got}
        free = [unit for unit in units if unit not in kept]
        for member in sorted(result, key=lambda m: (len(result[m]) - caps[m], m)):
            need = caps[member] - len(result[member])
            result[member].extend(free[:need])
            free = free[need:]
        return result


class CooperativeStickyAssignor(StickyAssignor):
    name = "cooperative-sticky"
    rebalance_protocol: RebalanceProtocol = "cooperative"

    def assign(self, units: Sequence[str], members: Mapping[str, Subscription]) -> Assignment:
        return withhold_owned(super().assign(units, members), members)


def withhold_owned(target: Mapping[str, Sequence[str]], members: Mapping[str, Subscription]) -> Assignment:
    """``target`` less every unit some other member still reports owning (KIP-429): its
    owner sees it missing, revokes it and rejoins, and the next generation hands it on."""
    claimed: dict[str, set[str]] = {}
    for member, sub in members.items():
        for unit in sub.owned:
            claimed.setdefault(unit, set()).add(member)
    return {member: [unit for unit in got if claimed.get(unit, {member}) <= {member}] for member, got in target.items()}


ASSIGNORS: dict[str, type[Assignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}
