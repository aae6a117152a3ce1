"""The real kube-apiserver admits the Group CRD's spec.assignment and its CEL rules, and
refuses what the emulator refuses (tests/operator/test_group_assignment.py)."""

from __future__ import annotations

import pathlib
import uuid
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.fixtures.real_kubernetes import install_crds
from tests.operator.conftest import INVALID_ASSIGNMENTS

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def groups_api(real_admin_api: k8s.ApiClient, real_namespace: str) -> k8s.CustomObjectsApi:
    install_crds(real_admin_api)
    return k8s.CustomObjectsApi(real_admin_api)


def _body(spec: dict[str, Any]) -> dict[str, Any]:
    name = f"g-{uuid.uuid4().hex[:8]}"
    return {"apiVersion": "kubecoord.dev/v1alpha1", "kind": "Group", "metadata": {"name": name}, "spec": spec}


def test_valid_assignment_is_admitted_and_immutable(groups_api: k8s.CustomObjectsApi, real_namespace: str) -> None:
    body = _body({"assignment": {"units": 64, "assignor": "cooperative-sticky"}})
    created = groups_api.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", real_namespace, "groups", body)
    assert created["spec"]["assignment"] == {
        "units": 64, "assignor": "cooperative-sticky", "sessionTimeoutSeconds": 10, "rebalanceTimeoutSeconds": 30,
    }
    created["spec"]["assignment"]["units"] = 65
    with pytest.raises(ApiException) as error:
        groups_api.replace_namespaced_custom_object(
            "kubecoord.dev", "v1alpha1", real_namespace, "groups", body["metadata"]["name"], created
        )
    assert error.value.status == 422 and "immutable" in str(error.value.body)


def test_assignment_is_admitted_on_a_zookeeper_backed_group(
    groups_api: k8s.CustomObjectsApi, real_namespace: str
) -> None:
    """The operator leads zookeeper-backed groups too (tests/operator/test_group_assignment_real.py)."""
    spec = {"backend": "zookeeper", "zookeeper": {"hosts": ["zk:2181"]}, "assignment": {"units": 4}}
    created = groups_api.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", real_namespace, "groups",
                                                         _body(spec))
    assert created["spec"]["assignment"]["units"] == 4 and created["spec"]["backend"] == "zookeeper"


@pytest.mark.parametrize(
    ("spec", "message"),
    INVALID_ASSIGNMENTS,
)
def test_invalid_assignment_is_refused(
    groups_api: k8s.CustomObjectsApi, real_namespace: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(ApiException) as error:
        groups_api.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", real_namespace, "groups", _body(spec))
    assert error.value.status == 422 and message in str(error.value.body)


def test_the_partitions_example_is_admitted(
    groups_api: k8s.CustomObjectsApi, real_admin_api: k8s.ApiClient, real_namespace: str
) -> None:
    """examples/partitions/deployment.yaml as kubectl apply would send it (server-side
    validation of every object; no Pods run on a bare API server)."""
    from kubernetes import utils

    docs = list(yaml.safe_load_all((ROOT / "examples" / "partitions" / "deployment.yaml").read_text()))
    for doc in docs:
        if doc["kind"] == "Group":
            groups_api.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", real_namespace, "groups", doc)
        else:
            utils.create_from_dict(real_admin_api, doc, namespace=real_namespace)
    apps = k8s.AppsV1Api(real_admin_api)
    assert apps.read_namespaced_deployment("partition-worker", real_namespace).spec.replicas == 3
