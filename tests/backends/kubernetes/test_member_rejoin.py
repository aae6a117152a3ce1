"""A member whose process crashed rejoins under the same id at once (its Lease is no longer
renewed), on the emulator and the real server; a live duplicate is still refused. Before,
the id stayed taken for a whole lease duration (30 s here)."""

from __future__ import annotations

import uuid

import pytest

import kubecoord
from kubecoord import MemberExistsError
from kubecoord.testing import crash

from .clusters import Cluster

TIMINGS = {"lease_duration": 30.0, "renew_deadline": 20.0, "retry_period": 2.0}


def test_a_crashed_member_rejoins_under_its_id_without_waiting_out_its_lease(cluster: Cluster) -> None:
    group = f"rejoin-{uuid.uuid4().hex[:8]}"
    options = {"kubeconfig": str(cluster.admin_kubeconfig), **TIMINGS}
    first = kubecoord.connect(cluster.url, **options)
    second = kubecoord.connect(cluster.url, **options)
    third = kubecoord.connect(cluster.url, **options)
    try:
        first.group_membership(group).join("pod-0", data="before")
        with pytest.raises(MemberExistsError):  # alive and renewing: a real duplicate
            third.group_membership(group).join("pod-0", data="duplicate")
        crash(first)  # kill -9: no leave, no more renewals
        members = second.group_membership(group)
        members.join("pod-0", data="after")  # the restarted pod, long before 30 s pass
        assert members.membership() == {"pod-0": "after"}
    finally:
        for coordinator in (third, second, first):
            coordinator.close()
