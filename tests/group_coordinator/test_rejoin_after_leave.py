"""A member that leaves and joins again takes part in a new generation: it never takes
back the assignment of a generation it gave up (the record no longer names it among that
generation's holders, so the leader would not fence it). The group member state machine
(test_state_machine_member.py) found it: the last member left and joined again with the
same handle and was handed its old generation's units a second time."""

from __future__ import annotations

import uuid

import kubecoord
from kubecoord.group_coordinator import UnitsProtocol
from kubecoord.testing import ManualClock

from ..helpers import eventually

UNITS = [f"u{i}" for i in range(4)]


class Generations(UnitsProtocol):
    def __init__(self) -> None:
        super().__init__(UNITS)
        self.completed: list[int] = []

    def on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        super().on_join_complete(generation, member_id, protocol, assignment)
        self.completed.append(generation)


def test_the_last_member_leaving_and_joining_again_gets_a_new_generation() -> None:
    url, clock = f"memory://rejoin-{uuid.uuid4().hex[:8]}", ManualClock()
    with kubecoord.connect(url, clock=clock) as first, kubecoord.connect(url, clock=clock) as second:
        one = first.group_coordinator("g", UnitsProtocol(UNITS), member_id="one", session_timeout=3.0)
        protocol = Generations()
        two = second.group_coordinator("g", protocol, member_id="two", session_timeout=3.0)
        one.join(timeout=10)
        two.join(timeout=10)
        eventually(two.is_stable)
        both = two.generation
        one.close()  # "two" is the group now, and its leader
        eventually(lambda: two.generation > both and two.is_stable())
        alone = two.generation
        assert sorted(protocol.owned) == UNITS

        two.leave()
        two.join(timeout=10)

        assert two.generation > alone, f"generation {alone} handed back after leave()"
        assert protocol.completed == sorted(set(protocol.completed)), protocol.completed
        assert sorted(protocol.owned) == UNITS
        two.ensure_generation(two.generation)
