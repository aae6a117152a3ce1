"""A member owning many units joins the group again after its member Lease is deleted
(on the emulator and the real server): the data it joins the membership with does not
grow with what it owns. 4,096 units, two assignors: the member's metadata names every
unit it owns (the list is below the compact encoding's threshold), 84 KB in all, over
the membership's 64 KiB cap; the re-join carries only the protocols and the unit list's
identity, and the owned units reach the leader in the generation record.

Two ways out of the membership: the Lease deleted under a running member (it failed on
both servers before: re-joins refused, "data is 84542 bytes"), and deleted while the
member's process is frozen past its Lease (it failed on the real server before; on the
emulator the resumed member kept its place without re-joining, before and after — why the
two servers differ there was not established)."""

from __future__ import annotations

import pathlib
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

import kubecoord
from kubecoord.api import GroupCoordinatorHandle
from kubecoord.group_coordinator import UnitsProtocol, decode_units
from kubecoord.validation import MAX_DATA_BYTES
from kubecoord.wire import object_names
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST
from .processes import Children

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


@pytest.fixture
def children(cluster: Cluster, tmp_path: pathlib.Path) -> Iterator[Children]:
    started = Children(cluster, tmp_path)
    yield started
    started.close()


def test_a_member_owning_4096_units_paused_while_its_lease_is_deleted_is_back(
    cluster: Cluster, children: Children
) -> None:
    """The member in a process of its own, frozen (SIGSTOP) past its 2 s Lease while the
    Lease is deleted, then resumed: within 60 s it is in the membership again, with small
    data, and holds every unit in a stable generation it is a member of."""
    group = f"pause-{uuid.uuid4().hex[:8]}"
    child = children.start("a", "units", group, "a", "4096", kubeconfig=cluster.admin_kubeconfig)
    child.wait_for(lambda line: line["event"] == "stable" and line["units"] == 4096, timeout=90)
    child.signal(signal.SIGSTOP)
    lease = object_names.member_lease_name(group, "a")
    k8s.CoordinationV1Api(cluster.admin_api).delete_namespaced_lease(lease, cluster.namespace)
    time.sleep(3.0)  # the pause outlasts the Lease's 2 s: what the member held has expired meanwhile
    child.signal(signal.SIGCONT)
    options: dict[str, Any] = {"kubeconfig": str(cluster.admin_kubeconfig), **FAST}
    with kubecoord.connect(cluster.url, **options) as observer:
        membership = observer.group_membership(group)

        def back() -> bool:
            described = observer.describe_group(group)
            stable = [line for line in child.lines if line["event"] == "stable"]
            return ("a" in membership.membership() and described is not None and described.phase == "stable"
                    and "a" in described.members and stable[-1]["generation"] == described.generation
                    and stable[-1]["units"] == 4096)

        eventually(back, 60)
        assert len(membership.membership()["a"].encode()) <= JOIN_DATA_BOUND
