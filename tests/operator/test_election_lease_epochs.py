"""The epoch a re-created election Lease starts at (kubecoord.operator.backing.election_lease):
never one that may have been issued already."""

from __future__ import annotations

from typing import Any

from kubecoord.operator.backing import election_lease, election_mark
from kubecoord.operator.rbac import rules


def _election(status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "kubecoord.dev/v1alpha1", "kind": "LeaderElection",
                            "metadata": {"name": "billing", "namespace": "ns", "uid": "u-1"},
                            "spec": {"leaseDurationSeconds": 7}}
    if status is not None:
        body["status"] = status
    return body


def test_a_new_elections_lease_starts_at_zero() -> None:
    lease = election_lease(_election())
    assert lease["spec"] == {"leaseTransitions": 0}


def test_a_lease_re_created_from_the_status_starts_one_above_its_epoch_with_its_leader() -> None:
    """The status may be one acquisition behind the deleted Lease: a Lease at status.epoch
    would hand that next epoch out a second time (the soak's epoch_not_increasing)."""
    status = {"observedGeneration": 1, "leader": "pod-a", "epoch": 4, "leaderSince": "2026-01-01T00:00:00.000000Z",
              "renewTime": "2026-01-01T00:00:05.000000Z"}
    spec = election_lease(_election(status))["spec"]
    assert spec["holderIdentity"] == "pod-a" and spec["leaseDurationSeconds"] == 7
    assert spec["leaseTransitions"] == 5
    # No leader in the status (released), or no epoch yet (reconciled, never acquired as
    # far as the status knows): one above all the same.
    assert election_lease(_election({"observedGeneration": 1, "epoch": 4}))["spec"] == {"leaseTransitions": 5}
    assert election_lease(_election({"observedGeneration": 1}))["spec"] == {"leaseTransitions": 1}


def test_a_lease_re_created_from_its_deleted_final_state_continues_it_exactly() -> None:
    """The DELETED event carries the last state the server had: nothing was issued after it."""
    final: dict[str, Any] = {"metadata": {"ownerReferences": [{"uid": "u-1"}]},
                             "spec": {"holderIdentity": "pod-b", "leaseTransitions": 6, "leaseDurationSeconds": 7}}
    spec = election_lease(_election({"observedGeneration": 1, "leader": "pod-a", "epoch": 4}), final)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("pod-b", 6)
    # A final state behind the status (edited down by hand) never lowers it.
    final["spec"]["leaseTransitions"] = 2
    assert election_lease(_election({"observedGeneration": 1, "epoch": 4}), final)["spec"]["leaseTransitions"] == 4


def test_a_final_state_the_watch_did_not_see_is_re_created_one_above() -> None:
    """A deletion noticed by a re-list (broken watch): the cache's version, which a newer
    acquisition may have followed (client-go's DeletedFinalStateUnknown)."""
    final = {"metadata": {"ownerReferences": [{"uid": "u-1"}],
                          "annotations": {"kubecoord.dev/final-state-unknown": "true"}},
             "spec": {"holderIdentity": "pod-b", "leaseTransitions": 6, "leaseDurationSeconds": 7}}
    lease = election_lease(_election({"observedGeneration": 1, "leader": "pod-a", "epoch": 4}), final)
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("pod-b", 7)
    assert "annotations" not in lease["metadata"]  # the mark is never written


def test_the_mark_is_made_at_the_leases_epoch_and_never_below_its_own_final_state() -> None:
    """The operator's high-water mark NAME.epoch: no holder, the Lease's epoch for a new one;
    a deleted mark comes back at its final state when that is higher (it must not go down)."""
    body = _election({"observedGeneration": 1, "epoch": 4})
    lease = election_lease(body)
    mark = election_mark(body, lease)
    assert mark["metadata"]["name"] == "billing.epoch"
    assert mark["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert mark["spec"] == {"leaseTransitions": 5}
    final = {"metadata": {"ownerReferences": [{"uid": "u-1"}]}, "spec": {"leaseTransitions": 9}}
    assert election_mark(body, lease, final)["spec"] == {"leaseTransitions": 9}
    # A same-named Lease somebody else made says nothing about this election's epochs.
    foreign = {"metadata": {}, "spec": {"leaseTransitions": 90}}
    assert election_mark(body, lease, foreign)["spec"] == {"leaseTransitions": 5}


def test_a_foreign_lease_withholds_its_mark_from_the_clients_too() -> None:
    body = {**_election(), "spec": {"clients": ["app"]}}
    granted = [rule for rule in rules(body) if rule["resources"] == ["leases"]]
    assert [rule["resourceNames"] for rule in granted] == [["billing", "billing.epoch"]]
    assert not [rule for rule in rules(body, withhold=["Lease billing"]) if rule["resources"] == ["leases"]]
