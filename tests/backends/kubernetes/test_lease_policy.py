"""The chart's admission policy that confines Group clients' Lease writes
(charts/kubecoord/templates/admissionpolicy.yaml, parameters from
kubecoord.operator.lease_grants), on the emulator and on the real kube-apiserver: the same
answers on both, the real server being the truth."""

from __future__ import annotations

import json
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

import kubecoord
from kubecoord import PermissionDeniedError
from kubecoord.operator import lease_grants
from tests.chart import conftest as chart_fixtures
from tests.chart.conftest import CHART, run_helm
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST

helm = chart_fixtures.helm

POLICY_WAIT = 60.0
"""Seconds for new policy parameters to take effect: the real server reads them through an
informer, which took past 20 s at load 16-20 (a fresh-clone run beside two engineers)."""


@pytest.fixture
def policy(cluster: Cluster, helm: pathlib.Path) -> Iterator[str]:
    """The chart's policy and binding, installed under a release name of this test's own (they
    are cluster-scoped; without the grants ConfigMap they affect nobody); removed after."""
    release = f"t{uuid.uuid4().hex[:6]}"
    rendered = run_helm(helm, "template", release, str(CHART), "--show-only", "templates/admissionpolicy.yaml")
    assert rendered.returncode == 0, rendered.stderr
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    assert [d["kind"] for d in documents] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    dynamic = DynamicClient(cluster.admin_api)
    resources = [dynamic.resources.get(api_version=d["apiVersion"], kind=d["kind"]) for d in documents]
    for resource, document in zip(resources, documents, strict=True):
        resource.create(body=document)
    yield release
    for resource, document in reversed(list(zip(resources, documents, strict=True))):
        resource.delete(name=document["metadata"]["name"])


def _lease(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {}}


def _denied(call: Any) -> ApiException:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value


def test_a_listed_service_account_writes_only_the_leases_it_is_granted(
    cluster: Cluster, policy: str, tmp_path: pathlib.Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    app, other = f"app-{suffix}", f"other-{suffix}"
    mine, theirs, election = f"g1-{suffix}", f"g2-{suffix}", f"el-{suffix}"
    role = cluster.grant_namespace_clients()  # RBAC: every Lease of the namespace, as a Group's Role does
    core = k8s.CoreV1Api(cluster.admin_api)
    grants = lease_grants.grants(
        [{"kind": "Group", "metadata": {"name": mine}, "spec": {"clients": [app]}}],
        [{"kind": "LeaderElection", "metadata": {"name": election}, "spec": {"clients": [app]}}],
    )
    core.create_namespaced_config_map(cluster.namespace, {"metadata": {"name": lease_grants.CONFIGMAP},
                                                          "data": grants})
    as_app = k8s.CoordinationV1Api(kubernetes.config.new_client_from_config(
        config_file=str(cluster.service_account_kubeconfig(app, tmp_path))))
    as_other = k8s.CoordinationV1Api(kubernetes.config.new_client_from_config(
        config_file=str(cluster.service_account_kubeconfig(other, tmp_path))))
    ns = cluster.namespace
    try:
        admin_leases = k8s.CoordinationV1Api(cluster.admin_api)

        def refused() -> bool:
            # The real server reads the parameters through an informer, so the policy may take
            # effect at any moment — between this probe's create and its clean-up too: the
            # clean-up is the admin's, which the policy never refuses.
            try:
                as_app.create_namespaced_lease(ns, _lease(f"{theirs}.m.x"))
            except ApiException as error:
                return error.status == 403
            admin_leases.delete_namespaced_lease(f"{theirs}.m.x", ns)
            return False

        eventually(refused, timeout=POLICY_WAIT, interval=0.2)
        error = _denied(lambda: as_app.create_namespaced_lease(ns, _lease(f"{theirs}.m.x")))
        status = json.loads(error.body)
        assert (error.status, status["reason"]) == (403, "Forbidden")
        assert (f'"{theirs}.m.x" is forbidden: ValidatingAdmissionPolicy \'kubecoord-lease-grants\' with binding '
                f'\'{policy}-kubecoord-lease-grants\'') in status["message"]
        assert status["message"].endswith(
            f"ServiceAccount {app} may write only the Leases of its kubecoord resources "
            f"({election}, {election}.epoch, {mine}-gc, {mine}-gc.epoch, {mine}.m.*), not {theirs}.m.x")
        assert _denied(lambda: as_app.create_namespaced_lease(ns, _lease(f"unrelated-{suffix}"))).status == 403
        # Its own: member Leases by prefix, the group coordinator's and the election's by name.
        for name in (f"{mine}.m.a", f"{mine}-gc", election):
            as_app.create_namespaced_lease(ns, _lease(name))
            as_app.patch_namespaced_lease(name, ns, {"spec": {"holderIdentity": "a"}})
        # Somebody else's Leases: an unlisted account writes them; the listed one cannot touch them.
        as_other.create_namespaced_lease(ns, _lease(f"{theirs}.m.y"))
        assert _denied(lambda: as_app.patch_namespaced_lease(
            f"{theirs}.m.y", ns, {"spec": {"holderIdentity": "a"}})).status == 403
        assert _denied(lambda: as_app.delete_namespaced_lease(f"{theirs}.m.y", ns)).status == 403
        as_app.delete_namespaced_lease(f"{mine}.m.a", ns)

        # Through the client: typed errors, and its own group works.
        with kubecoord.connect(cluster.url, kubeconfig=str(cluster.service_account_kubeconfig(app, tmp_path)),
                               **FAST) as coordinator:
            with pytest.raises(PermissionDeniedError, match="may write only the Leases"):
                coordinator.group_membership(theirs).join("w1")
            with pytest.raises(PermissionDeniedError, match="may write only the Leases"):
                coordinator.leader_election(f"unrelated-el-{suffix}").nominate("c1")
            group = coordinator.group_membership(mine)
            group.join("w1")
            eventually(lambda: group.membership_list() == {"w1"}, timeout=10)
            group.leave("w1")
    finally:
        core.delete_namespaced_config_map(lease_grants.CONFIGMAP, ns)
        cluster.revoke(role)


def test_a_group_client_cannot_label_its_leases_for_another_group(
    cluster: Cluster, policy: str, tmp_path: pathlib.Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    app, alpha, beta = f"app-{suffix}", f"alpha-{suffix}", f"beta-{suffix}"
    role = cluster.grant_namespace_clients()
    core = k8s.CoreV1Api(cluster.admin_api)
    grants = lease_grants.grants([{"kind": "Group", "metadata": {"name": alpha}, "spec": {"clients": [app]}}], [])
    core.create_namespaced_config_map(cluster.namespace, {"metadata": {"name": lease_grants.CONFIGMAP},
                                                          "data": grants})
    as_app = k8s.CoordinationV1Api(kubernetes.config.new_client_from_config(
        config_file=str(cluster.service_account_kubeconfig(app, tmp_path))))
    admin_leases = k8s.CoordinationV1Api(cluster.admin_api)
    ns = cluster.namespace

    def spoof(name: str, group: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"kubecoord.dev/group": group}}, "spec": {}}

    try:
        def confined() -> bool:  # the policy's parameters arrive through an informer
            try:
                as_app.create_namespaced_lease(ns, _lease(f"unrelated-{suffix}"))
            except ApiException as error:
                return error.status == 403
            admin_leases.delete_namespaced_lease(f"unrelated-{suffix}", ns)
            return False

        eventually(confined, timeout=POLICY_WAIT, interval=0.2)
        # Named inside its own prefix, labelled for another group: refused, with the reason.
        error = _denied(lambda: as_app.create_namespaced_lease(ns, spoof(f"{alpha}.m.x", beta)))
        assert error.status == 403
        assert json.loads(error.body)["message"].endswith(
            f"ServiceAccount {app} may label a Lease kubecoord.dev/group={beta} only if it is named {beta}.m.*, "
            f"not {alpha}.m.x")
        # Relabelling one of its own member Leases later: refused too.
        as_app.create_namespaced_lease(ns, spoof(f"{alpha}.m.y", alpha))
        assert _denied(lambda: as_app.patch_namespaced_lease(
            f"{alpha}.m.y", ns, {"metadata": {"labels": {"kubecoord.dev/group": beta}}})).status == 403
        # Its own group's label on its own Leases, and deleting them, still work.
        as_app.patch_namespaced_lease(f"{alpha}.m.y", ns, {"spec": {"holderIdentity": "y"}})
        as_app.delete_namespaced_lease(f"{alpha}.m.y", ns)
    finally:
        core.delete_namespaced_config_map(lease_grants.CONFIGMAP, ns)
        cluster.revoke(role)
