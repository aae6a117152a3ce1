"""The parameters of the chart's Lease admission policy (kubecoord.operator.lease_grants):
which Leases each Group client may write, for identities that are clients of several
resources."""

from __future__ import annotations

from typing import Any

from kubecoord.operator.lease_grants import allows, grants


def _body(kind: str, name: str, clients: list[str], **spec: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "uid": name}, "spec": {"clients": clients, **spec}}


def test_a_group_client_gets_its_members_prefix_and_the_coordinator_election() -> None:
    assert grants([_body("Group", "workers", ["app"])], []) == {"app": "workers-gc workers.m.*"}


def test_an_account_in_several_groups_and_elections_gets_each_of_their_leases() -> None:
    data = grants(
        [_body("Group", "a", ["app", "ops"]), _body("Group", "b", ["app"])],
        [_body("LeaderElection", "billing", ["app"]), _body("LeaderElection", "other", ["team-b"])],
    )
    assert data == {"app": "a-gc a.m.* b-gc b.m.* billing", "ops": "a-gc a.m.*"}


def test_accounts_no_group_confines_are_not_listed() -> None:
    """An election's or a store's client only (RBAC confines it by name), a zookeeper-backed
    Group's clients (no Lease rights at all) and a Group being deleted: no key."""
    deleting = _body("Group", "gone", ["leaving"])
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    data = grants(
        [_body("Group", "zk", ["zk-app"], backend="zookeeper"), deleting],
        [_body("LeaderElection", "billing", ["elector"])],
    )
    assert data == {}


def test_allows_matches_names_exactly_and_prefixes_by_star() -> None:
    entries = "workers-gc workers.m.* billing"
    assert allows(entries, "workers.m.w1-0123456789abcdef")
    assert allows(entries, "workers-gc") and allows(entries, "billing")
    assert not allows(entries, "workers")  # a Lease named like the group is not a member's
    assert not allows(entries, "billing-2") and not allows(entries, "workers2.m.x")
    assert not allows(entries, "other.m.workers.m.x")
