"""Invalid custom resources as a user meets them: the kubernetes client against the API
emulator, which admits custom resources through kubecoord_testkit.emulator.admission."""

from __future__ import annotations

import pathlib
import uuid
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client import ApiClient, ApiException

from testkit.tests.emulator.helpers import status_of

ROOT = pathlib.Path(__file__).resolve().parents[3]
GROUP, VERSION = "kubecoord.dev", "v1alpha1"


@pytest.fixture(scope="session")
def kubecoord_crds(api_client: ApiClient) -> None:
    """The CRDs of crds/, created once per session (another test folder may have done it)."""
    api = kubernetes.client.ApiextensionsV1Api(api_client)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        try:
            api.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        except ApiException as error:
            if error.status != 409:
                raise


def create(
    custom: kubernetes.client.CustomObjectsApi, namespace: str, plural: str, kind: str, spec: dict[str, Any]
) -> Any:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": f"r-{uuid.uuid4().hex[:8]}"},
        "spec": spec,
    }
    return custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)


def refused(
    custom: kubernetes.client.CustomObjectsApi, namespace: str, plural: str, kind: str, spec: dict[str, Any]
) -> dict[str, Any]:
    with pytest.raises(ApiException) as caught:
        create(custom, namespace, plural, kind, spec)
    assert caught.value.status == 422
    status = status_of(caught.value)
    assert status["reason"] == "Invalid" and status["details"]["kind"] == kind
    return status


pytestmark = pytest.mark.usefixtures("kubecoord_crds")


def test_defaults_are_filled_in(custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    created = create(custom, namespace, "leaderelections", "LeaderElection", {})
    assert created["spec"] == {
        "backend": "kubernetes",
        "leaseDurationSeconds": 15,
        "renewDeadlineSeconds": 10,
        "retryPeriodSeconds": 2,
    }
    stored = custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, "leaderelections", created["metadata"]["name"]
    )
    assert stored["spec"] == created["spec"]


def test_renew_deadline_not_below_lease_duration(custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    status = refused(
        custom, namespace, "leaderelections", "LeaderElection", {"leaseDurationSeconds": 5, "renewDeadlineSeconds": 8}
    )
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.renewDeadlineSeconds"]
    assert (
        'spec.renewDeadlineSeconds: Invalid value: "object": '
        "renewDeadlineSeconds must be less than leaseDurationSeconds" in (status["message"])
    )


def test_zookeeper_backend_without_connection_settings(
    custom: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    status = refused(custom, namespace, "groups", "Group", {"backend": "zookeeper"})
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.zookeeper"]
    assert "spec.zookeeper: Required value" in status["message"]


def test_negative_size_limit(custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    status = refused(custom, namespace, "kvstores", "KVStore", {"sizeLimit": "-5Mi"})
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.sizeLimit"]


def test_unknown_backend(custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    status = refused(custom, namespace, "kvstores", "KVStore", {"backend": "consul"})
    assert 'spec.backend: Unsupported value: "consul"' in status["message"]


def test_unknown_fields_are_pruned(custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    created = create(custom, namespace, "kvstores", "KVStore", {"sizeLimit": "2Mi", "colour": "blue"})
    assert "colour" not in created["spec"] and created["spec"]["sizeLimit"] == "2Mi"


def test_an_invalid_patch_is_refused_and_nothing_changes(
    custom: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    created = create(custom, namespace, "leaderelections", "LeaderElection", {})
    name = created["metadata"]["name"]
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "leaderelections", name, {"spec": {"backend": "zookeeper"}}
        )
    assert caught.value.status == 422
    message = status_of(caught.value)["message"]
    assert "backend is immutable" in message and "spec.zookeeper: Required value" in message
    stored = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "leaderelections", name)
    assert stored["spec"] == created["spec"]
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_status_subresource_is_validated(custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    created = create(custom, namespace, "groups", "Group", {})
    name = created["metadata"]["name"]
    patched = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "groups", name, {"status": {"generation": 2}}
    )
    assert patched["status"]["generation"] == 2
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "groups", name, {"status": {"generation": "two"}}
        )
    assert caught.value.status == 422
    assert status_of(caught.value)["details"]["causes"][0]["field"] == "status.generation"
