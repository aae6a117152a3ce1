"""Hand edits of an election's Lease (kubectl edit, a script, another controller) on the
emulator and on the real kube-apiserver: the leader writes its own lease duration back and
never lets the epoch — its fencing token — go below what it holds."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kubernetes import client as k8s

import kubecoord
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST


def _patch_spec(cluster: Cluster, name: str, spec: dict[str, Any]) -> None:
    k8s.CoordinationV1Api(cluster.admin_api).patch_namespaced_lease(name, cluster.namespace, {"spec": spec})


def _spec(cluster: Cluster, name: str) -> dict[str, Any]:
    lease = cluster.lease(name)
    assert lease is not None
    return dict(lease["spec"])


def test_an_edited_lease_duration_does_not_stick_and_no_follower_takes_over(cluster: Cluster) -> None:
    name = f"edit-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"kubeconfig": str(cluster.admin_kubeconfig), **FAST}
    with kubecoord.connect(cluster.url, **options) as first, kubecoord.connect(cluster.url, **options) as second:
        leader, follower = first.leader_election(name), second.leader_election(name)
        assert leader.nominate("pod-a")
        assert not follower.nominate("pod-b")
        _patch_spec(cluster, name, {"leaseDurationSeconds": 1})
        # The leader writes its own duration again with its next renewal ...
        eventually(lambda: _spec(cluster, name)["leaseDurationSeconds"] == 3, timeout=10)
        # ... and the follower, which saw "1 s" for a moment, never leads beside it.
        deadline = time.monotonic() + 2 * FAST["lease_duration"]
        while time.monotonic() < deadline:
            assert leader.is_leader("pod-a")
            assert not follower.is_leader("pod-b")
            time.sleep(0.05)


def test_an_epoch_edited_down_is_written_back_up_by_its_leader(cluster: Cluster) -> None:
    name = f"epoch-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"kubeconfig": str(cluster.admin_kubeconfig), **FAST}
    with kubecoord.connect(cluster.url, **options) as first, kubecoord.connect(cluster.url, **options) as second:
        leader, follower = first.leader_election(name), second.leader_election(name)
        assert leader.nominate("pod-a")
        leader.resign("pod-a")
        assert follower.nominate("pod-b")
        eventually(lambda: follower.is_leader("pod-b"), timeout=10)
        held = follower.get_leader()
        assert held is not None and held.epoch == 2
        _patch_spec(cluster, name, {"leaseTransitions": 0})
        eventually(lambda: _spec(cluster, name)["leaseTransitions"] == 2, timeout=10)
        assert follower.is_leader("pod-b")
        eventually(lambda: (leader.get_leader() or held).epoch == 2, timeout=10)
        # The next term goes above the epoch held, not above the edited value.
        follower.resign("pod-b")
        leader.nominate("pod-a")
        eventually(lambda: leader.is_leader("pod-a"), timeout=10)
        current = leader.get_leader()
        assert current is not None and current.epoch == 3
