"""Member Leases that claim a group by label or a member id by annotation without the name
that proves it (object_names.member_id_of), on the emulator and the real kube-apiserver:
they are nobody's members, whoever wrote them (here the admin, as a client of another group
would in a namespace without the admission policy)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from kubernetes import client as k8s

import kubecoord
from kubecoord.wire import object_names
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST


def _member_lease(name: str, group: str, member_id: str) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "metadata": {
            "name": name,
            "labels": {object_names.GROUP_LABEL: group},
            "annotations": {object_names.MEMBER_ID_ANNOTATION: member_id, object_names.MEMBER_DATA_ANNOTATION: "x"},
        },
        "spec": {"holderIdentity": member_id, "leaseDurationSeconds": 3600, "renewTime": now, "acquireTime": now},
    }


def test_leases_that_only_claim_a_group_or_an_id_are_not_members(cluster: Cluster) -> None:
    alpha, beta = f"alpha-{uuid.uuid4().hex[:6]}", f"beta-{uuid.uuid4().hex[:6]}"
    leases = k8s.CoordinationV1Api(cluster.admin_api)
    with kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), **FAST) as coordinator:
        group = coordinator.group_membership(beta)
        group.join("w1")
        eventually(lambda: group.membership_list() == {"w1"}, timeout=10)
        # alpha's prefix, beta's label: an intruder added to beta.
        leases.create_namespaced_lease(cluster.namespace, _member_lease(f"{alpha}.m.intruder", beta, "intruder"))
        # beta's prefix and label, but named for another id than the one it claims: w1's impostor.
        impostor = object_names.member_lease_name(beta, "someone-else")
        leases.create_namespaced_lease(cluster.namespace, _member_lease(impostor, beta, "w2"))
        # A genuine-looking member written the same way counts (the test can see a member appear).
        leases.create_namespaced_lease(
            cluster.namespace, _member_lease(object_names.member_lease_name(beta, "w3"), beta, "w3"))
        eventually(lambda: group.membership_list() == {"w1", "w3"}, timeout=10)
        assert set(coordinator.group_membership(beta).membership()) == {"w1", "w3"}
        # beta's own client still manages its members: w1 leaves, the intruders stay outside.
        group.leave("w1")
        eventually(lambda: group.membership_list() == {"w3"}, timeout=10)
