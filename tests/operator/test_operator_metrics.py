"""The operator's per-resource gauges that the chart's alerts read: whether an election
has a leader (and since when), its lease duration, and a group's membership changes."""

from __future__ import annotations

import pathlib
import time

from prometheus_client import REGISTRY

import kubecoord
from tests.helpers import eventually
from tests.operator.conftest import NAMESPACE, Resources

FAST = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}


def _sample(metric: str, /, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, labels)


def test_leader_presence_and_since_follow_the_election(
    resources: Resources, kubeconfig_path: pathlib.Path, unique: str
) -> None:
    name = f"present-{unique}"
    labels = {"namespace": NAMESPACE, "name": name}
    resources.create("leaderelections", "LeaderElection", name,
                     {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5})
    eventually(lambda: _sample("kubecoord_operator_leader_present", **labels) == 0.0, timeout=15)
    assert _sample("kubecoord_operator_lease_duration_seconds", **labels) == 3.0
    leaderless_since = _sample("kubecoord_operator_leader_present_since_timestamp_seconds", **labels)
    assert leaderless_since is not None and abs(leaderless_since - time.time()) < 60

    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path), **FAST) as coord:
        election = coord.leader_election(name)
        assert election.nominate("pod-a")
        eventually(lambda: _sample("kubecoord_operator_leader_present", **labels) == 1.0, timeout=15)
        leading_since = _sample("kubecoord_operator_leader_present_since_timestamp_seconds", **labels)
        assert leading_since is not None and leading_since > leaderless_since
        election.resign("pod-a")
        eventually(lambda: _sample("kubecoord_operator_leader_present", **labels) == 0.0, timeout=15)
        again = _sample("kubecoord_operator_leader_present_since_timestamp_seconds", **labels)
        assert again is not None and again >= leading_since


def test_membership_changes_are_counted_per_group(
    resources: Resources, kubeconfig_path: pathlib.Path, unique: str
) -> None:
    name = f"churn-{unique}"
    resources.create("groups", "Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5})
    resources.wait_ready("groups", name)
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path), **FAST) as coord:
        group = coord.group_membership(name)
        group.join("w1")
        group.join("w2")
        joined = {"namespace": NAMESPACE, "name": name, "change": "joined"}
        eventually(lambda: _sample("kubecoord_operator_membership_changes_total", **joined) == 2.0)
        group.leave("w1")
        left = {"namespace": NAMESPACE, "name": name, "change": "left"}
        eventually(lambda: _sample("kubecoord_operator_membership_changes_total", **left) == 1.0, timeout=15)
