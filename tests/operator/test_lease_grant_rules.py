"""The parameters of the chart's Lease admission policy (kubecoord.operator.lease_grants):
which Leases each Group client may write, for identities that are clients of several
resources."""

from __future__ import annotations

from typing import Any

from kubecoord.operator.lease_grants import allows, grants, with_bound_clients


def _body(kind: str, name: str, clients: list[str], **spec: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "uid": name}, "spec": {"clients": clients, **spec}}


def test_a_group_client_gets_its_members_prefix_and_the_coordinator_election() -> None:
    assert grants([_body("Group", "workers", ["app"])], []) == {"app": "workers-gc workers-gc.epoch workers.m.*"}


def test_an_account_in_several_groups_and_elections_gets_each_of_their_leases() -> None:
    data = grants(
        [_body("Group", "a", ["app", "ops"]), _body("Group", "b", ["app"])],
        [_body("LeaderElection", "billing", ["app"]), _body("LeaderElection", "other", ["team-b"])],
    )
    assert data == {"app": "a-gc a-gc.epoch a.m.* b-gc b-gc.epoch b.m.* billing billing.epoch",
                    "ops": "a-gc a-gc.epoch a.m.*"}


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


def _binding(kind: str, name: str, accounts: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": f"kubecoord-{kind.lower()}-{name}", "namespace": "ns"},
            "subjects": [{"kind": "ServiceAccount", "name": a, "namespace": "ns"} for a in accounts]}


def _confined(groups: list[dict[str, Any]], elections: list[dict[str, Any]],
              bindings: list[dict[str, Any]]) -> dict[str, str]:
    return grants(*with_bound_clients(groups, elections, bindings))


def test_a_client_removed_from_the_spec_stays_confined_while_its_rolebinding_binds_it() -> None:
    """Whoever recomputes — this Group's spec write or any other resource's — between the
    spec change and the RoleBinding's update (issue 21: another Group's resume after a
    restart lifted it first)."""
    group = _body("Group", "workers", ["stays"])
    assert _confined([group], [], [_binding("Group", "workers", ["stays", "leaves"])]) == {
        "leaves": "workers-gc workers-gc.epoch workers.m.*", "stays": "workers-gc workers-gc.epoch workers.m.*"}
    # Once the RoleBinding no longer binds it, the confinement goes.
    stays = _confined([group], [], [_binding("Group", "workers", ["stays"])])
    assert stays == {"stays": "workers-gc workers-gc.epoch workers.m.*"}
    # A new client is confined from its spec, before any RoleBinding binds it.
    assert set(_confined([_body("Group", "workers", ["stays", "new"])], [], [])) == {"stays", "new"}


def test_a_deleted_or_deleting_groups_binding_confines_its_subjects_until_it_is_gone() -> None:
    deleting = _body("Group", "going", ["app"])
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    bindings = [_binding("Group", "going", ["app"]), _binding("Group", "gone", ["old"])]
    assert _confined([deleting], [], bindings) == {"app": "going-gc going-gc.epoch going.m.*",
                                                   "old": "gone-gc gone-gc.epoch gone.m.*"}
    assert _confined([deleting], [], []) == {}


def test_bindings_of_other_backends_and_of_elections_only_confine_nobody_new() -> None:
    zk = _body("Group", "zk", ["zk-app"], backend="zookeeper")
    election = _body("LeaderElection", "billing", ["elector"])
    bindings = [_binding("Group", "zk", ["zk-app"]), _binding("LeaderElection", "billing", ["elector", "app"])]
    assert _confined([zk], [election], bindings) == {}
    # An election's bound client that is also a Group client keeps that election's Lease.
    group = _body("Group", "workers", ["app"])
    widened = _confined([zk, group], [election], bindings)
    assert widened == {"app": "billing billing.epoch workers-gc workers-gc.epoch workers.m.*"}
