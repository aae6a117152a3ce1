"""A member whose metadata in the group record nobody can read (its membership data is
readable: UnitsProtocol joins the membership with join_metadata()) is assigned nothing,
and the others are assigned: by the operator's leader step and by a member leader."""

from __future__ import annotations

import time
import uuid

import kubecoord
from kubecoord.group_coordinator import UnitsProtocol, decode_units, encode_units
from kubecoord.group_coordinator.record import publish
from kubecoord.operator.kinds.group.assignment import AssignmentSpec, GroupCoordinatorView
from kubecoord.wire.group_record import REBALANCING, STABLE, STATE_KEY, decode_state, derived_name, encode_join_data


def test_a_member_whose_record_metadata_is_unreadable_is_left_out_of_the_operators_assignment() -> None:
    spec = AssignmentSpec(units=tuple(str(i) for i in range(6)), assignor="sticky",
                          session_timeout=1.0, rebalance_timeout=10.0)
    with kubecoord.connect(f"memory://assign-{uuid.uuid4().hex[:8]}") as coord:
        view = GroupCoordinatorView(coord, "g", spec, wake=lambda: None)
        membership = coord.group_membership("g")
        store = coord.storage(derived_name("g"))
        try:
            # Every member joins the membership with readable data (what join_metadata() gives)...
            for member in ("a", "b", "bad"):
                membership.join(member, data=encode_join_data("units", (("sticky", encode_units([])),)))
            state, _ = view.step()
            assert state is not None and state.phase == REBALANCING and set(state.members) == {"a", "b", "bad"}
            # ...and joins the generation; "bad" writes metadata() nobody can read into the record.
            versioned = store.fetch_versioned(STATE_KEY).result()
            assert versioned is not None
            current = decode_state(versioned.value)
            members = dict(current.members)
            members["bad"] = (("sticky", b"{not json"),)
            assert publish(store, current.evolve(members=members, joined=frozenset(members)), versioned.version)

            state, _ = view.step()
            assert state is not None and state.phase == STABLE and state.generation == current.generation
            got = {m: decode_units(data, spec.units)[0] for m, data in state.assignment.items()}
            assert sorted(got["a"] + got["b"]) == list(spec.units) and got["a"] and got["b"]
            assert not got["bad"]
        finally:
            view.close()
            membership.close()
            store.close()


class _Unreadable(UnitsProtocol):
    def metadata(self) -> list[tuple[str, bytes]]:
        return [("sticky", b"{not json")]


def test_a_member_whose_record_metadata_is_unreadable_is_left_out_of_a_member_leaders_assignment() -> None:
    units = [str(i) for i in range(6)]
    with kubecoord.connect(f"memory://assign-{uuid.uuid4().hex[:8]}") as coord:
        # "bad" joins first, so a well-behaved member may lead; either way nobody can read it.
        members = [coord.group_coordinator("g", _Unreadable(units, assignors=["sticky"]), member_id="bad",
                                           session_timeout=1.0, rebalance_timeout=10.0)]
        try:
            members[0].join()
            for member_id in ("a", "b"):
                member = coord.group_coordinator("g", UnitsProtocol(units, assignors=["sticky"]),
                                                 member_id=member_id, session_timeout=1.0, rebalance_timeout=10.0)
                members.append(member)
                member.join()
            deadline = time.monotonic() + 60
            while True:
                description = coord.describe_group("g")
                if (description is not None and set(description.members) == {"a", "b", "bad"}
                        and description.phase == STABLE):
                    break
                assert time.monotonic() < deadline, f"not assigned: {description}"
                time.sleep(0.05)
            got = {m: decode_units(data, units)[0] for m, data in description.assignment.items()}
            assert sorted(got["a"] + got["b"]) == units and got["a"] and got["b"]
            assert not got["bad"]
        finally:
            for member in members:
                member.close()
