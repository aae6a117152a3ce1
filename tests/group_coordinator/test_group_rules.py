"""The leader's rules (kubecoord.group_coordinator.leading) and the generation record."""

from __future__ import annotations

import pytest

from kubecoord import GroupProtocolError
from kubecoord.group_coordinator.leading import Decision, LeaderTimers, decide
from kubecoord.group_coordinator.record import select_protocol
from kubecoord.wire.group_record import (
    REBALANCING,
    STABLE,
    GroupState,
    Protocols,
    decode_state,
    derived_name,
    encode_state,
)

META = (("sticky", b"m"),)


def _decide(state: GroupState, live: set[str], now: float = 0.0, timers: LeaderTimers | None = None) -> Decision:
    return decide(
        state, {m: META for m in live}, leader_id="l", epoch=1, now=now, wall=1000.0 + now,
        timers=timers or LeaderTimers(), session_timeout=5.0, rebalance_timeout=20.0,
        assign=lambda protocol, metadata: {m: m.encode() for m in metadata},
    )


def test_membership_change_starts_a_generation() -> None:
    stable = GroupState(3, STABLE, "units", members={"a": META}, holders=frozenset({"a"}), leader="l", leader_epoch=1)
    decision = _decide(stable, {"a", "b"})
    assert decision.kind == "rebalance" and decision.state is not None
    assert decision.state.generation == 4 and decision.state.phase == REBALANCING
    assert set(decision.state.members) == {"a", "b"} and decision.state.holders == {"a"}


def test_assigned_only_when_everyone_joined() -> None:
    state = GroupState(4, REBALANCING, "units", members={"a": META, "b": META}, joined=frozenset({"a"}))
    assert _decide(state, {"a", "b"}).state is None
    done = _decide(state.evolve(joined=frozenset({"a", "b"})), {"a", "b"})
    assert done.kind == "complete" and done.state is not None
    assert done.state.phase == STABLE and done.state.generation == 4
    assert done.state.assignment == {"a": b"a", "b": b"b"} and done.state.holders == {"a", "b"}


def test_a_departed_holder_is_fenced_for_a_session_before_assignment() -> None:
    timers = LeaderTimers()
    state = GroupState(5, REBALANCING, "units", members={"a": META}, joined=frozenset({"a"}), holders=frozenset({"x"}))
    first = _decide(state, {"a"}, now=100.0, timers=timers)
    assert first.state is None and first.wake_in == pytest.approx(5.0)
    assert _decide(state, {"a"}, now=104.9, timers=timers).state is None
    done = _decide(state, {"a"}, now=105.0, timers=timers)
    assert done.kind == "complete" and done.state is not None and done.state.holders == {"a"}


def test_laggards_are_excluded_after_the_rebalance_timeout() -> None:
    timers = LeaderTimers()
    state = GroupState(6, REBALANCING, "units", members={"a": META, "b": META}, joined=frozenset({"a"}))
    assert _decide(state, {"a", "b"}, now=0.0, timers=timers).state is None
    decision = _decide(state, {"a", "b"}, now=20.0, timers=timers)
    assert decision.kind == "rebalance" and decision.state is not None
    assert decision.state.excluded == {"b"} and set(decision.state.members) == {"a"}


def test_rejoin_request_starts_a_generation() -> None:
    stable = GroupState(2, STABLE, "units", members={"a": META}, rejoin=True, leader="l", leader_epoch=1)
    decision = _decide(stable, {"a"})
    assert decision.kind == "rebalance" and decision.state is not None and not decision.state.rejoin


def test_record_round_trips_and_refuses_other_formats() -> None:
    state = GroupState(
        7, STABLE, "units", leader="w1", leader_epoch=3, members={"w1": (("sticky", b"\x00\xff"),)},
        joined=frozenset({"w1"}), holders=frozenset({"w1"}), protocol="sticky", assignment={"w1": b"\x01"},
    )
    assert decode_state(encode_state(state)) == state
    with pytest.raises(GroupProtocolError):
        decode_state('{"format": 2}')
    with pytest.raises(GroupProtocolError):
        decode_state("not json")


def test_protocol_vote_and_no_common_protocol() -> None:
    members: dict[str, Protocols] = {
        "a": (("range", b""), ("roundrobin", b"")),
        "b": (("roundrobin", b""), ("sticky", b"")),
    }
    assert select_protocol(members) == "roundrobin"
    assert select_protocol({"a": (("x", b""), ("y", b"")), "b": (("y", b""), ("x", b""))}) == "x"
    with pytest.raises(GroupProtocolError):
        select_protocol({"a": (("x", b""),), "b": (("y", b""),)})


def test_derived_names_stay_dns_labels() -> None:
    assert derived_name("workers") == "workers-gc"
    long = derived_name("a" * 63)
    assert len(long) <= 63 and long.endswith("-gc") and long != derived_name("a" * 62 + "b")


def test_a_record_over_the_value_limit_is_a_typed_error_before_any_write() -> None:
    """Failed before as whatever the backend said (BackendUnavailable on Kubernetes)."""
    import kubecoord
    from kubecoord.group_coordinator.record import publish
    from kubecoord.wire.group_record import STATE_KEY

    with kubecoord.connect("memory://record-limit", max_value_bytes=4096) as coord:
        store = coord.storage("g-gc")
        big = GroupState(1, STABLE, "units", members={"a": (("sticky", b"x" * 4096),)})
        with pytest.raises(kubecoord.ValueTooLargeError, match="over the 4096 bytes a value of store 'g-gc'"):
            publish(store, big, None)
        assert store.fetch_versioned(STATE_KEY).result() is None
        assert publish(store, GroupState(1, STABLE, "units"), None)
        store.close()


def test_a_member_whose_record_metadata_is_unreadable_is_assigned_nothing() -> None:
    # Its membership data was readable (it got into the generation); the metadata it
    # wrote into the record when it joined is not: the others are assigned without it.
    unreadable: Protocols = (("sticky", b"{not json"),)
    state = GroupState(4, REBALANCING, "units", members={"a": META, "bad": unreadable, "b": META},
                       joined=frozenset({"a", "bad", "b"}))
    asked: list[set[str]] = []

    def assign(protocol: str, metadata: dict[str, bytes]) -> dict[str, bytes]:
        asked.append(set(metadata))
        if any(data != b"m" for data in metadata.values()):  # as a real assignor refuses it
            raise GroupProtocolError("malformed units metadata")
        return {m: m.encode() for m in metadata}

    done = decide(
        state, {m: META for m in ("a", "bad", "b")}, leader_id="l", epoch=1, now=0.0, wall=1000.0,
        timers=LeaderTimers(), session_timeout=5.0, rebalance_timeout=20.0, assign=assign,
        readable=lambda protocols: all(data == b"m" for _, data in protocols),
    )
    assert done.kind == "complete" and done.state is not None and done.state.phase == STABLE
    assert asked == [{"a", "b"}]
    assert done.state.assignment == {"a": b"a", "b": b"b", "bad": b""}


def test_group_coordinator_refuses_an_unknown_option_by_name() -> None:
    """group_coordinator()'s options are the interface's (member_id, session_timeout,
    rebalance_timeout, history); any other is an InvalidArgumentError naming it, before
    anything joins."""
    import kubecoord
    from kubecoord import InvalidArgumentError
    from kubecoord.group_coordinator import UnitsProtocol

    with kubecoord.connect("memory://") as coord:
        with pytest.raises(InvalidArgumentError, match="session_timout"):
            coord.group_coordinator("workers", UnitsProtocol(["u0"]), session_timout=5)  # type: ignore[call-arg]
        assert not coord.group_membership("workers").membership()
