"""The operator keeps the parameters of the chart's Lease admission policy: the ConfigMap
kubecoord-lease-grants of each namespace (kubecoord.operator.lease_grants), on the emulator."""

from __future__ import annotations

import kubernetes
from kubernetes.client.exceptions import ApiException

from kubecoord.operator.lease_grants import CONFIGMAP
from tests.helpers import eventually
from tests.operator.conftest import NAMESPACE, Resources


def _grants(core: kubernetes.client.CoreV1Api) -> dict[str, str]:
    try:
        return dict(core.read_namespaced_config_map(CONFIGMAP, NAMESPACE).data or {})
    except ApiException as error:
        if error.status == 404:
            return {}
        raise


def test_the_operator_writes_repairs_and_trims_the_lease_grants(
    resources: Resources, k8s: kubernetes.client.ApiClient, unique: str
) -> None:
    core = kubernetes.client.CoreV1Api(k8s)
    group, election = f"grants-{unique}", f"grants-el-{unique}"
    app, elector = f"app-{unique}", f"elector-{unique}"
    resources.create("groups", "Group", group, {"clients": [app]})
    resources.create("leaderelections", "LeaderElection", election, {"clients": [app, elector]})
    wanted = {f"{group}.m.*", f"{group}-gc", f"{group}-gc.epoch", election, f"{election}.epoch"}
    eventually(lambda: set(_grants(core).get(app, "").split()) == wanted, timeout=30, interval=0.2)
    assert elector not in _grants(core)  # an election's client only: RBAC confines it by name
    owners = core.read_namespaced_config_map(CONFIGMAP, NAMESPACE).metadata.owner_references
    assert group in {ref.name for ref in owners} and not any(ref.controller for ref in owners)

    core.delete_namespaced_config_map(CONFIGMAP, NAMESPACE)  # drift: re-created by the controller's resync check
    eventually(lambda: set(_grants(core).get(app, "").split()) == wanted, timeout=60, interval=0.5)

    resources.custom.patch_namespaced_custom_object("kubecoord.dev", "v1alpha1", NAMESPACE, "groups", group,
                                                   {"spec": {"clients": None}})
    eventually(lambda: app not in _grants(core), timeout=30, interval=0.2)
    resources.delete("leaderelections", election)
    resources.delete("groups", group)
