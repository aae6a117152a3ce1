"""Contract: group membership (KIP-30 GroupMembershipClient) on every backend."""

from __future__ import annotations

import pytest

from kubecoord import InvalidArgumentError, MemberExistsError, MemberNotFoundError

from ..helpers import Recorder, eventually
from .harness import Harness


def test_join_leave_and_membership(harness: Harness, name: str) -> None:
    one = harness.connect().group_membership(name)
    two = harness.connect().group_membership(name)
    one.join("w1", data="host=10.0.0.7")
    two.join("w2")
    eventually(lambda: one.membership_list() == {"w1", "w2"}, harness.settle)
    assert two.membership() == {"w1": "host=10.0.0.7", "w2": ""}
    two.leave("w2")
    eventually(lambda: one.membership() == {"w1": "host=10.0.0.7"}, harness.settle)


def test_duplicate_live_member_is_rejected(harness: Harness, name: str) -> None:
    one = harness.connect().group_membership(name)
    two = harness.connect().group_membership(name)
    one.join("w1", data="first")
    with pytest.raises(MemberExistsError):
        two.join("w1", data="second")
    with pytest.raises(MemberExistsError):
        one.join("w1")
    assert two.membership() == {"w1": "first"}


def test_leave_of_unknown_member_raises(harness: Harness, name: str) -> None:
    group = harness.connect().group_membership(name)
    with pytest.raises(MemberNotFoundError):
        group.leave("nobody")


def test_listeners_fire_on_join_leave_and_expiry(harness: Harness, name: str) -> None:
    watcher = harness.connect().group_membership(name)
    seen: Recorder[set[str]] = Recorder()
    watcher.add_listener(seen)
    staying = harness.connect().group_membership(name)
    doomed_coordinator = harness.connect()
    doomed = doomed_coordinator.group_membership(name)

    staying.join("stay")
    doomed.join("doomed")
    seen.wait_last({"stay", "doomed"}, harness.settle)
    staying.leave("stay")
    seen.wait_last({"doomed"}, harness.settle)
    staying.join("stay")
    seen.wait_last({"stay", "doomed"}, harness.settle)

    harness.crash(doomed_coordinator)
    harness.expire()
    seen.wait_last({"stay"}, harness.settle)
    assert watcher.membership_list() == {"stay"}


def test_close_leaves(harness: Harness, name: str) -> None:
    watcher = harness.connect().group_membership(name)
    closing = harness.connect()
    closing.group_membership(name).join("w1")
    eventually(lambda: watcher.membership_list() == {"w1"}, harness.settle)
    closing.close()
    eventually(lambda: watcher.membership_list() == set(), harness.settle)


@pytest.mark.parametrize("bad", ["", "a/b", "tab\tbed"])
def test_invalid_member_ids_are_rejected(harness: Harness, name: str, bad: str) -> None:
    group = harness.connect().group_membership(name)
    with pytest.raises(InvalidArgumentError):
        group.join(bad)
    assert group.membership_list() == set()
