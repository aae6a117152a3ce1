"""Assignors: every unit to exactly one member, balanced, and sticky moves the minimum."""

from __future__ import annotations

import random

import pytest

from kubecoord.group_coordinator import (
    ASSIGNORS,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    minimum_moves,
    moved,
)

UNITS = [f"p{i}" for i in range(10)]


def _check_balanced(units: list[str], result: dict[str, list[str]], members: set[str]) -> None:
    assert set(result) == members
    flat = [u for got in result.values() for u in got]
    assert sorted(flat) == sorted(units) and len(flat) == len(set(flat))
    counts = [len(got) for got in result.values()]
    assert max(counts) - min(counts) <= 1


def test_range_gives_contiguous_runs_in_member_order() -> None:
    result = RangeAssignor().assign(UNITS, {"b": Subscription(), "a": Subscription(), "c": Subscription()})
    assert result == {"a": UNITS[0:4], "b": UNITS[4:7], "c": UNITS[7:10]}


def test_roundrobin_deals_units_in_turn() -> None:
    result = RoundRobinAssignor().assign(UNITS, {"b": Subscription(), "a": Subscription()})
    assert result == {"a": UNITS[0::2], "b": UNITS[1::2]}


def test_no_members_no_assignment() -> None:
    for cls in ASSIGNORS.values():
        assert cls().assign(UNITS, {}) == {}


def test_sticky_keeps_owned_units_and_moves_the_minimum() -> None:
    before = {"a": UNITS[0:5], "b": UNITS[5:10]}
    subs = {"a": Subscription(tuple(before["a"]), 3), "b": Subscription(tuple(before["b"]), 3), "c": Subscription()}
    result = StickyAssignor().assign(UNITS, subs)
    _check_balanced(UNITS, result, {"a", "b", "c"})
    assert set(result["a"]) <= set(before["a"]) and set(result["b"]) <= set(before["b"])
    assert moved(before, result) == minimum_moves(UNITS, subs) == 3


def test_sticky_resolves_a_double_claim_by_generation() -> None:
    subs = {"a": Subscription(("p0", "p1"), 2), "b": Subscription(("p1",), 5)}
    result = StickyAssignor().assign(["p0", "p1"], subs)
    assert result == {"a": ["p0"], "b": ["p1"]}


def test_sticky_drops_units_no_longer_listed() -> None:
    subs = {"a": Subscription(("gone", "p0"), 1), "b": Subscription()}
    result = StickyAssignor().assign(["p0", "p1"], subs)
    assert result == {"a": ["p0"], "b": ["p1"]}


@pytest.mark.parametrize("seed", range(30))
def test_every_assignor_balances_and_sticky_is_minimal(seed: int) -> None:
    rng = random.Random(seed)
    units = [f"u{i}" for i in range(rng.randint(0, 40))]
    names = [f"m{i}" for i in range(rng.randint(1, 8))]
    owners = {u: rng.choice([*names, None]) for u in units}
    subs = {m: Subscription(tuple(u for u, o in owners.items() if o == m), rng.randint(0, 3)) for m in names}
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor):
        result = cls().assign(units, subs)
        _check_balanced(units, result, set(names))
        assert moved({m: s.owned for m, s in subs.items()}, result) >= minimum_moves(units, subs)
    sticky = StickyAssignor().assign(units, subs)
    assert moved({m: s.owned for m, s in subs.items()}, sticky) == minimum_moves(units, subs)


@pytest.mark.parametrize("seed", range(30))
def test_cooperative_sticky_never_gives_a_unit_another_member_owns(seed: int) -> None:
    rng = random.Random(seed)
    units = [f"u{i}" for i in range(rng.randint(1, 30))]
    names = [f"m{i}" for i in range(rng.randint(1, 6))]
    owners = {u: rng.choice([*names, None]) for u in units}
    subs = {m: Subscription(tuple(u for u, o in owners.items() if o == m), 1) for m in names}
    result = CooperativeStickyAssignor().assign(units, subs)
    target = StickyAssignor().assign(units, subs)
    for member, got in result.items():
        assert set(got) <= set(target[member])  # a subset of the sticky target
        for unit in got:
            assert owners[unit] in (None, member)
    # Everything withheld is exactly what moves from one owner to another.
    withheld = {u for m, got in target.items() for u in got} - {u for got in result.values() for u in got}
    assert withheld == {u for m, got in target.items() for u in got if owners[u] not in (None, m)}


def test_eager_members_stay_sticky_through_their_revocation() -> None:
    """An eager member gives its units up before it reports its metadata; it reports them
    as ``previous`` so the sticky assignor keeps them where they were."""
    from kubecoord.group_coordinator import UnitsProtocol, decode_subscription, encode_units

    protocol = UnitsProtocol(UNITS)
    protocol.on_join_complete(3, "a", "sticky", encode_units(UNITS[:5]))
    protocol.on_join_prepare(3, "a")
    assert protocol.owned == []
    (_, data), = protocol.metadata()
    subscription = decode_subscription(data)
    assert subscription.owned == () and subscription.previous == tuple(UNITS[:5])
    result = StickyAssignor().assign(UNITS, {"a": subscription, "b": Subscription()})
    assert result["a"] == UNITS[:5]


def test_the_operator_withholds_only_what_is_still_owned() -> None:
    from kubecoord.group_coordinator import decode_units, encode_units
    from kubecoord.operator.kinds.group.assignment import AssignmentSpec, assign_units

    spec = AssignmentSpec(units=tuple(UNITS), assignor="sticky")
    eager = {"a": encode_units([], 1, previous=UNITS), "b": encode_units([], -1)}
    got = {m: decode_units(data)[0] for m, data in assign_units(spec, eager).items()}
    assert len(got["a"]) == len(got["b"]) == 5  # released units move at once
    cooperative = {"a": encode_units(UNITS, 1), "b": encode_units([], -1)}
    got = {m: decode_units(data)[0] for m, data in assign_units(spec, cooperative).items()}
    assert len(got["a"]) == 5 and got["b"] == []  # still owned by a: withheld until released


def test_units_of_a_large_list_travel_as_index_runs_tied_to_that_list() -> None:
    """4,096 names of 100 characters: metadata and assignments stay small whatever a
    member owns, and are never read against another unit list."""
    import pytest

    from kubecoord.errors import GroupProtocolError
    from kubecoord.group_coordinator import decode_subscription, decode_units, encode_units

    units = [f"{i:04d}-" + "u" * 95 for i in range(4096)]
    everything = encode_units(units, 7, universe=units)
    assert len(everything) < 100 and decode_units(everything, units) == (units, 7)
    alternate = encode_units(units[0::2], 7, previous=units[1::2], universe=units)
    assert len(alternate) < 24 * 1024
    assert decode_subscription(alternate, units).previous == tuple(units[1::2])
    with pytest.raises(GroupProtocolError, match="unit list is needed"):
        decode_units(everything)
    with pytest.raises(GroupProtocolError, match="another unit list"):
        decode_units(everything, [*units[:-1], "other"])
    for runs in ("5-3", "0-4096", "3,3", "1-", "-1", "a", "0-2,1"):
        hostile = b'{"of":' + everything.split(b'"of":')[1].split(b",")[0] + b',"u":"' + runs.encode() + b'"}'
        with pytest.raises(GroupProtocolError, match="malformed"):
            decode_subscription(hostile, units)
    small = [f"p{i}" for i in range(12)]
    assert decode_units(encode_units(small[:3], universe=small)) == (small[:3], -1)  # short lists keep names


@pytest.mark.parametrize("width", [1, 100], ids=["short-names", "long-names"])
def test_the_data_a_member_joins_with_names_no_unit_it_owns(width: int) -> None:
    """A member owning every unit of 4,096, with two assignors, joins the membership with
    ~100 bytes (its metadata names them: 84 KB with short names, over the membership's
    64 KiB cap); the join data still ties it to its unit list (a member of another list is
    refused), and metadata() still reports what it owns."""
    from kubecoord.group_coordinator import UnitsProtocol, decode_units, encode_units
    from kubecoord.group_coordinator.rejoin import join_data
    from kubecoord.validation import MAX_DATA_BYTES
    from kubecoord.wire.group_record import decode_join_data

    units = [f"p{i}" + "u" * (width - 1) for i in range(4096)]
    owner = UnitsProtocol(units, assignors=("sticky", "range"))
    owner.on_join_complete(3, "a", "sticky", encode_units(units, universe=units))
    assert len(owner.owned) == 4096
    data = join_data(owner)
    assert len(data.encode()) < 256
    decoded = decode_join_data(data)
    assert decoded is not None and [name for name, _ in decoded[1]] == ["sticky", "range"]
    assert all(decode_units(meta, units) == ([], -1) and owner.accepts_metadata(name, meta)
               for name, meta in decoded[1])
    if width == 1:  # names travel in full below the compact threshold
        assert sum(len(meta) * 4 // 3 for _, meta in owner.metadata()) > MAX_DATA_BYTES
    assert all(decode_units(meta, units) == (units, 3) for _, meta in owner.metadata())
    stranger = UnitsProtocol([*units[:-1], "other" * width], assignors=("sticky", "range"))
    stranger_join = decode_join_data(join_data(stranger))
    assert stranger_join is not None
    if width == 100:  # the compact form carries the list's digest: another list is refused at join
        assert not any(owner.accepts_metadata(name, meta) for name, meta in stranger_join[1])
