"""A member owning many units joins the group again after its member Lease is deleted
(on the emulator and the real server): the data it joins the membership with does not
grow with what it owns. 4,096 units, two assignors: the member's metadata names every
unit it owns (the list is below the compact encoding's threshold), 84 KB in all, over
the membership's 64 KiB cap; the re-join carries only the protocols and the unit list's
identity, and the owned units reach the leader in the generation record."""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes import client as k8s

import kubecoord
from kubecoord.api import GroupCoordinatorHandle
from kubecoord.group_coordinator import UnitsProtocol, decode_units
from kubecoord.validation import MAX_DATA_BYTES
from kubecoord.wire import object_names
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST

UNITS = [f"p{index}" for index in range(4096)]
SESSION = {"session_timeout": 2.0, "rebalance_timeout": 4.0}
JOIN_DATA_BOUND = 512
"""Bytes of membership data a UnitsProtocol member with two assignors joins with, whatever it owns."""


def _units(member: GroupCoordinatorHandle) -> list[str]:
    return decode_units(member.assignment or b"")[0] if member.assignment else []


def test_a_member_owning_4096_units_joins_again_after_its_lease_is_deleted(cluster: Cluster) -> None:
    group = f"many-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"kubeconfig": str(cluster.admin_kubeconfig), **FAST}
    coordinator = kubecoord.connect(cluster.url, **options)
    observer = kubecoord.connect(cluster.url, **options)
    try:
        protocol = UnitsProtocol(UNITS, assignors=("sticky", "range"))
        member = coordinator.group_coordinator(group, protocol, member_id="a", **SESSION)
        member.join(timeout=60)
        assert sorted(_units(member)) == sorted(UNITS)
        # What re-joining with the owned units would weigh: over the membership's cap.
        assert sum(len(data) * 4 // 3 for _, data in protocol.metadata()) > MAX_DATA_BYTES
        before = member.generation
        membership = observer.group_membership(group)
        assert len(membership.membership()["a"].encode()) <= JOIN_DATA_BOUND

        lease = object_names.member_lease_name(group, "a")
        k8s.CoordinationV1Api(cluster.admin_api).delete_namespaced_lease(lease, cluster.namespace)

        # Back in a later generation (only a member of the membership gets one), with every unit.
        eventually(lambda: member.is_stable() and member.generation > before and len(_units(member)) == 4096, 60)
        assert sorted(_units(member)) == sorted(UNITS)
        eventually(lambda: "a" in membership.membership(), 30)
        assert len(membership.membership()["a"].encode()) <= JOIN_DATA_BOUND
    finally:
        observer.close()
        coordinator.close()
