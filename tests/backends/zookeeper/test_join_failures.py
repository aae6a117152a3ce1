"""join() on zookeeper:// when its create is applied but never answered and the node cannot be
looked up: the error says the outcome is unknown, and the member it may have made can be
withdrawn (leave(), close()) or joined for good (join() again).

Before, join() raised plain BackendUnavailableError ("not applied") while the node stood for
the rest of the session, listed as a live member by everyone; leave() raised
MemberNotFoundError and close() left it: nobody could remove it short of ending the session.

A real server; the member's client reaches it through the fault proxy, which holds the
server's answers, then breaks the connection and refuses new ones for longer than the
request timeout (so the client cannot look its node up), then lets it reconnect to the same
session (the shape of test_nominate_failures.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

import kubecoord
from kubecoord import Coordinator, GroupMembership, OutcomeUnknownError
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually

from .helpers import applied_unanswered, proxied_and_direct


@pytest.fixture
def unanswered_join(
    zookeeper_server: ZooKeeperServer, zk: KazooClient
) -> Iterator[tuple[GroupMembership, Coordinator, list[BaseException | None]]]:
    """A group handle whose join("m") was applied unanswered (the proxy healed since), the
    other coordinator, and what that join raised."""
    chroot = f"join-{uuid.uuid4().hex[:8]}"
    groups = f"/{chroot}/groups/g"
    with proxied_and_direct(zookeeper_server, chroot) as (proxy, cut_off, other):
        group = cut_off.group_membership("g")
        outcome = applied_unanswered(proxy, zk, groups, lambda: group.join("m"))
        yield group, other, outcome


def _listed(other: Coordinator) -> set[str]:
    return other.group_membership("g").membership_list()


def test_the_join_reports_its_outcome_unknown(
    unanswered_join: tuple[GroupMembership, Coordinator, list[BaseException | None]],
) -> None:
    _, other, outcome = unanswered_join
    assert len(outcome) == 1 and isinstance(outcome[0], OutcomeUnknownError), outcome  # before: BackendUnavailableError
    assert _listed(other) == {"m"}  # it was applied


def test_leave_withdraws_the_member_of_an_unanswered_join(
    unanswered_join: tuple[GroupMembership, Coordinator, list[BaseException | None]],
) -> None:
    group, other, _ = unanswered_join

    def leave() -> bool:  # once the client has reconnected
        try:
            group.leave("m")  # before: MemberNotFoundError
        except kubecoord.BackendUnavailableError:
            return False
        return True

    eventually(leave, 30)
    eventually(lambda: _listed(other) == set(), 30)


def test_close_withdraws_the_member_of_an_unanswered_join(
    unanswered_join: tuple[GroupMembership, Coordinator, list[BaseException | None]],
) -> None:
    group, other, _ = unanswered_join

    def reconnected() -> bool:
        try:
            return group.membership_list() == {"m"}
        except kubecoord.BackendUnavailableError:
            return False

    eventually(reconnected, 30)
    group.close()
    eventually(lambda: _listed(other) == set(), 30)  # before: listed for the rest of the session


def test_joining_again_after_an_unanswered_join_joins(
    unanswered_join: tuple[GroupMembership, Coordinator, list[BaseException | None]],
) -> None:
    group, other, _ = unanswered_join

    def join() -> bool:
        try:
            group.join("m")  # finds its own node
        except kubecoord.BackendUnavailableError:
            return False
        return True

    eventually(join, 30)
    assert _listed(other) == {"m"}
    group.leave("m")
    eventually(lambda: _listed(other) == set(), 30)
