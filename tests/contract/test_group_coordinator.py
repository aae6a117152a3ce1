"""Contract: the group coordinator (KIP-795) on every backend.

Each member runs on its own coordinator (as in its own process). Units are tracked in a
Ledger that fails when a unit is given to a member while another still holds it.
"""

from __future__ import annotations

import threading

import pytest

from kubecoord import (
    GroupProtocol,
    InvalidArgumentError,
    RebalanceInProgressError,
    StaleGenerationError,
)
from kubecoord.group_coordinator import GroupMember, UnitsProtocol, decode_units
from kubecoord.wire.group_record import STATE_KEY, derived_name

from ..helpers import eventually
from .harness import Harness
from .ledger import Ledger

UNITS = [f"p{i}" for i in range(12)]
SESSION = 2.0


def _member(harness: Harness, name: str, member_id: str, protocol: GroupProtocol, **options: float) -> GroupMember:
    member = harness.connect().group_coordinator(
        name, protocol, member_id=member_id, session_timeout=SESSION, rebalance_timeout=options.get("rebalance", 20.0)
    )
    assert isinstance(member, GroupMember)
    return member


def _settled(members: list[GroupMember]) -> bool:
    """Every member stable in one generation, and their assignments cover UNITS once."""
    if not all(m.is_stable() for m in members) or len({m.generation for m in members}) != 1:
        return False
    got = [u for m in members for u in decode_units(m.assignment or b"")[0]]
    return sorted(got) == sorted(UNITS)


def test_members_share_every_unit_once(harness: Harness, name: str) -> None:
    ledger = Ledger()
    members = [_member(harness, name, f"w{i}", ledger.protocol(f"w{i}", UNITS)) for i in range(3)]
    for member in members:
        member.join()
    eventually(lambda: _settled(members), harness.settle * 2)
    assert ledger.violations == []
    assert sorted(len(ledger.held_by(f"w{i}")) for i in range(3)) == [4, 4, 4]
    description = members[0].describe()
    assert description is not None
    assert description.generation == members[0].generation >= 1
    assert description.phase == "stable" and description.protocol == "sticky"
    assert description.leader in {"w0", "w1", "w2"} and description.members == ("w0", "w1", "w2")
    members[1].ensure_generation(members[1].generation)
    with pytest.raises(StaleGenerationError):
        members[1].ensure_generation(members[1].generation - 1)


def test_describe_group_reads_the_record_without_joining(harness: Harness, name: str) -> None:
    observer = harness.connect()
    assert observer.describe_group(name) is None  # no member ever joined through a group coordinator
    with pytest.raises(InvalidArgumentError):
        observer.describe_group("Not A Name")
    ledger = Ledger()
    members = [_member(harness, name, f"w{i}", ledger.protocol(f"w{i}", UNITS)) for i in range(2)]
    for member in members:
        member.join()
    eventually(lambda: _settled(members), harness.settle * 2)

    def same_as_the_members_view() -> bool:
        described = observer.describe_group(name)
        return described is not None and described == members[0].describe()

    eventually(same_as_the_members_view, harness.settle)
    described = observer.describe_group(name)
    assert described is not None
    assert described.group == name and described.phase == "stable" and described.members == ("w0", "w1")
    assert described.generation == members[0].generation and described.version is not None
    assert described.leader in {"w0", "w1"} and set(described.assignment) == {"w0", "w1"}
    with observer.group_membership(name) as group:  # describing joined nothing
        assert group.membership_list() == {"w0", "w1"}


def test_leave_hands_units_on_and_fences_the_leaver(harness: Harness, name: str) -> None:
    ledger = Ledger()
    members = [_member(harness, name, f"w{i}", ledger.protocol(f"w{i}", UNITS)) for i in range(3)]
    for member in members:
        member.join()
    eventually(lambda: _settled(members), harness.settle * 2)
    before = members[0].generation
    leaving = members[2]
    leaving.leave()
    with pytest.raises(StaleGenerationError):
        leaving.ensure_generation(before)
    assert ledger.held_by("w2") == set()
    eventually(lambda: _settled(members[:2]) and members[0].generation > before, harness.settle * 2)
    assert ledger.violations == []
    assert sorted(len(ledger.held_by(m)) for m in ("w0", "w1")) == [6, 6]


def test_members_that_left_never_lead_the_group_later(harness: Harness, name: str) -> None:
    """leave() withdraws the candidacy even of a member that does not lead: one left in the
    running would win once the leader goes and lead a group it is not in, with no worker to
    act (before, resign() left such a candidate running). Then the same handle joins again."""
    members = [_member(harness, name, f"w{i}", UnitsProtocol(UNITS)) for i in range(2)]
    for member in members:
        member.join()
    eventually(lambda: _settled(members), harness.settle * 2)
    election = harness.connect().leader_election(derived_name(name))
    leader = election.get_leader()
    assert leader is not None
    follower = next(m for m in members if m.member_id != leader.id)
    follower.leave()
    next(m for m in members if m.member_id == leader.id).leave()
    eventually(lambda: election.get_leader() is None, harness.settle * 2)
    follower.join()
    eventually(lambda: _settled([follower]), harness.settle * 2)
    now_leading = election.get_leader()
    assert now_leading is not None and now_leading.id == follower.member_id


def test_closing_the_coordinator_lets_its_member_leave_first(harness: Harness, name: str) -> None:
    """KIP-795: the coordinator calls onLeavePrepare when it leaves the group, on close too.
    Exiting the ``with`` of a member's coordinator gives its units up before the group
    hears it left, so the others get them with no overlap and without a session wait."""
    ledger = Ledger()
    stays = [_member(harness, name, f"w{i}", ledger.protocol(f"w{i}", UNITS)) for i in range(2)]
    closing = harness.connect()
    leaver = closing.group_coordinator(
        name, ledger.protocol("w2", UNITS), member_id="w2", session_timeout=SESSION, rebalance_timeout=20.0
    )
    assert isinstance(leaver, GroupMember)
    with closing:
        for member in [*stays, leaver]:
            member.join()
        eventually(lambda: _settled([*stays, leaver]), harness.settle * 2)
        held = ledger.held_by("w2")
        generation = leaver.generation
        assert held
    assert ledger.held_by("w2") == set()  # on_leave_prepare ran: its units were revoked
    assert set(ledger.revoked.get("w2", [])) >= held
    with pytest.raises(StaleGenerationError):
        leaver.ensure_generation(generation)
    eventually(lambda: _settled(stays) and stays[0].generation > generation, harness.settle * 2)
    assert ledger.violations == []
    assert sorted(len(ledger.held_by(m)) for m in ("w0", "w1")) == [6, 6]


def test_crashed_member_is_fenced_before_its_units_move(harness: Harness, name: str) -> None:
    ledger = Ledger()
    members = [_member(harness, name, f"w{i}", ledger.protocol(f"w{i}", UNITS)) for i in range(3)]
    for member in members:
        member.join()
    eventually(lambda: _settled(members), harness.settle * 2)
    doomed = members[1]
    doomed_units = ledger.held_by("w1")
    doomed_generation = doomed.generation
    fence_checked: list[bool] = []

    def doomed_is_fenced(receiver: str) -> None:
        if receiver != "w1" and ledger.held_by(receiver) & doomed_units:
            try:
                doomed.ensure_generation(doomed_generation)
                fence_checked.append(False)
            except StaleGenerationError:
                fence_checked.append(True)

    ledger.checks["fence"] = doomed_is_fenced
    harness.crash(doomed._coordinator)
    ledger.crashed("w1")  # the process is gone; its work stopped with it
    harness.expire()
    survivors = [members[0], members[2]]
    eventually(lambda: _settled(survivors), harness.settle * 3)
    assert ledger.violations == []
    assert fence_checked and all(fence_checked)
    assert survivors[0].generation > doomed_generation


class _Blocking(UnitsProtocol):
    """Eager units whose on_join_prepare can be held, to observe a rebalance in flight."""

    def __init__(self, units: list[str]) -> None:
        super().__init__(units)
        self.hold = threading.Event()
        self.hold.set()
        self.preparing = threading.Event()

    def on_join_prepare(self, generation: int, member_id: str) -> None:
        if generation >= 0:
            self.preparing.set()
            self.hold.wait(30)
        super().on_join_prepare(generation, member_id)


def test_ensure_generation_fails_while_an_eager_rebalance_is_in_flight(harness: Harness, name: str) -> None:
    slow_protocol = _Blocking(UNITS)
    fast = _member(harness, name, "fast", UnitsProtocol(UNITS))
    slow = _member(harness, name, "slow", slow_protocol)
    fast.join()
    slow.join()
    eventually(lambda: _settled([fast, slow]), harness.settle * 2)
    generation = fast.generation
    slow_protocol.hold.clear()
    newcomer = _member(harness, name, "newcomer", UnitsProtocol(UNITS))
    newcomer.join()
    assert slow_protocol.preparing.wait(harness.settle)
    eventually(lambda: not fast.is_stable(), harness.settle)
    with pytest.raises(RebalanceInProgressError):
        fast.ensure_generation(generation)
    assert newcomer.assignment is None  # nobody is assigned while "slow" still holds its units
    slow_protocol.hold.set()
    eventually(lambda: _settled([fast, slow, newcomer]), harness.settle * 2)
    assert fast.generation > generation


def test_cooperative_members_keep_unmoved_units(harness: Harness, name: str) -> None:
    ledger = Ledger()
    options = {"assignors": ["cooperative-sticky"]}
    first = [_member(harness, name, f"w{i}", ledger.protocol(f"w{i}", UNITS, **options)) for i in range(2)]
    for member in first:
        member.join()
    eventually(lambda: _settled(first), harness.settle * 2)
    kept = {m.member_id: ledger.held_by(m.member_id) for m in first}
    revoked_before = {m: len(ledger.revoked.get(m, [])) for m in ("w0", "w1")}
    generation = first[0].generation
    third = _member(harness, name, "w2", ledger.protocol("w2", UNITS, **options))
    third.join()
    everyone = [*first, third]
    eventually(lambda: _settled(everyone) and len(ledger.held_by("w2")) == 4, harness.settle * 3)
    assert ledger.violations == []
    # KIP-429: only the moving units were revoked, two from each (the minimum), and
    # the follow-up rebalance handed them on.
    assert [len(ledger.revoked.get(m, [])) - revoked_before[m] for m in ("w0", "w1")] == [2, 2]
    for member in first:
        assert ledger.held_by(member.member_id) <= kept[member.member_id]
        member.ensure_generation(member.generation)
    assert first[0].generation >= generation + 2


def test_protocol_is_the_one_every_member_supports(harness: Harness, name: str) -> None:
    a = _member(harness, name, "a", UnitsProtocol(UNITS, assignors=["range", "roundrobin"]))
    b = _member(harness, name, "b", UnitsProtocol(UNITS, assignors=["roundrobin", "sticky"]))
    a.join()
    b.join()
    eventually(lambda: _settled([a, b]), harness.settle * 2)
    assert a.protocol_name == b.protocol_name == "roundrobin"
    assert decode_units(a.assignment or b"")[0] == UNITS[0::2]


def test_invalid_arguments_are_rejected_before_any_request(harness: Harness, name: str) -> None:
    coordinator = harness.connect()
    with pytest.raises(InvalidArgumentError):
        coordinator.group_coordinator("Not_A_Label", UnitsProtocol(UNITS))
    with pytest.raises(InvalidArgumentError):
        coordinator.group_coordinator(name, UnitsProtocol(UNITS), member_id="a/b")
    with pytest.raises(InvalidArgumentError):
        coordinator.group_coordinator(name, UnitsProtocol(UNITS), session_timeout=0)
    with pytest.raises(InvalidArgumentError):
        UnitsProtocol(UNITS, assignors=["no-such-assignor"])
    assert coordinator.group_membership(name).membership() == {}


@pytest.mark.parametrize(
    "poison",
    [
        '{"t":"units","p":[["sticky",null]]}',  # well-formed JSON, wrong types
        '{"t":"units","p":[["sticky","bm90IGpzb24="]]}',  # valid base64 of metadata that is not JSON
        '{"t":"units","p":[["sticky","eyJ1bml0cyI6WzFdfQ=="]]}',  # {"units":[1]}
        '{"t":"units","p":"sticky"}',
        '[1,2,3]',
    ],
)
def test_a_member_with_malformed_data_is_excluded_never_the_group(harness: Harness, name: str, poison: str) -> None:
    ledger = Ledger()
    members = [_member(harness, name, f"w{i}", ledger.protocol(f"w{i}", UNITS)) for i in range(2)]
    members[0].join()
    eventually(lambda: _settled(members[:1]), harness.settle * 2)
    # A raw member of the group, with data no coordinator member would write.
    poisoned = harness.connect().group_membership(name)
    poisoned.join("poison", data=poison)
    members[1].join()
    eventually(lambda: _settled(members), harness.settle * 2)
    assert ledger.violations == []
    # It leaves; the group goes on rebalancing (the leader's worker is alive).
    poisoned.leave("poison")
    members[0].leave()
    eventually(lambda: _settled(members[1:]), harness.settle * 2)
    assert sorted(ledger.held_by("w1")) == sorted(UNITS) and ledger.violations == []


LONG_UNITS = [f"{i:04d}-" + "u" * 95 for i in range(4096)]  # the CRD's bounds: 4,096 names of 100 characters


def test_a_group_of_4096_long_unit_names_is_assigned_rebalances_and_rejoins(harness: Harness, name: str) -> None:
    """Failed before: the record (563 KB) passed the value limit and a member owning every
    unit could not re-join (73 KB of member data): units now travel as index runs."""
    ledger = Ledger()

    def settled(members: list[GroupMember]) -> bool:
        if not all(m.is_stable() for m in members) or len({m.generation for m in members}) != 1:
            return False
        got = [u for m in members for u in decode_units(m.assignment or b"", LONG_UNITS)[0]]
        return sorted(got) == LONG_UNITS

    first = _member(harness, name, "w0", ledger.protocol("w0", LONG_UNITS))
    first.join()
    eventually(lambda: settled([first]), harness.settle * 2)
    assert len(ledger.held_by("w0")) == 4096
    # w0 now reports owning all 4,096 units in its membership data as it re-joins.
    others = [_member(harness, name, f"w{i}", ledger.protocol(f"w{i}", LONG_UNITS)) for i in (1, 2)]
    for member in others:
        member.join()
    members = [first, *others]
    eventually(lambda: settled(members), harness.settle * 3)
    assert sorted(len(ledger.held_by(f"w{i}")) for i in range(3)) == [1365, 1365, 1366]
    store = harness.connect().storage(derived_name(name))
    record = store.fetch_versioned(STATE_KEY).result()
    assert record is not None and len(record.value.encode()) < 16 * 1024
    before = first.generation
    others[1].leave()
    eventually(lambda: settled(members[:2]) and first.generation > before, harness.settle * 3)
    back = _member(harness, name, "w2", ledger.protocol("w2", LONG_UNITS))
    back.join()
    eventually(lambda: settled([first, others[0], back]), harness.settle * 3)
    assert ledger.violations == []
    assert sorted(len(ledger.held_by(f"w{i}")) for i in range(3)) == [1365, 1365, 1366]
