"""kopf against the emulator: discovery, watches, finalizers, status patches, events."""

from __future__ import annotations

import pathlib
import uuid
from typing import Any

import kopf
import kubernetes
import pytest
from kopf.testing import KopfRunner
from kubernetes.client import ApiException
from tests.helpers import eventually

OPERATOR = pathlib.Path(__file__).with_name("kopf_operator.py")
GROUP, VERSION, PLURAL = "example.kubecoord.dev", "v1", "gadgets"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


@pytest.fixture
def gadgets(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    try:
        kubernetes.client.ApiextensionsV1Api(api_client).create_custom_resource_definition(CRD)
    except ApiException as error:
        if error.status != 409:
            raise
    return kubernetes.client.CustomObjectsApi(api_client)


def _get(gadgets: kubernetes.client.CustomObjectsApi, name: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = gadgets.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return obj


def test_kopf_operator_handles_create_update_and_delete(
    gadgets: kubernetes.client.CustomObjectsApi,
    kubeconfig_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    core: kubernetes.client.CoreV1Api,
) -> None:
    monkeypatch.setenv("KUBECOORD_TEST_KUBECONFIG", str(kubeconfig_path))
    name = f"g-{uuid.uuid4().hex[:8]}"
    args = ["run", "--standalone", "--namespace", "default", "--verbose", str(OPERATOR)]
    # A registry of its own: other tests' operators register handlers in kopf's default one,
    # and `kopf run` makes the registry it is given the default: put theirs back afterwards.
    previous = kopf.get_default_registry()
    try:
        with KopfRunner(args, timeout=60, registry=kopf.OperatorRegistry(), settings=kopf.OperatorSettings()) as runner:
            _exercise(gadgets, core, name)
    finally:
        kopf.set_default_registry(previous)
    assert runner.exit_code == 0
    assert runner.exception is None
    assert "Handler 'created' succeeded." in runner.output
    assert "Handler 'deleted' succeeded." in runner.output
    assert "Traceback" not in runner.output


def _exercise(gadgets: kubernetes.client.CustomObjectsApi, core: kubernetes.client.CoreV1Api, name: str) -> None:
    """Create, update and delete a Gadget while the operator runs."""
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gadget", "metadata": {"name": name}, "spec": {"size": 2}}
    gadgets.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)

    def ready() -> bool:
        obj = _get(gadgets, name)
        return obj is not None and obj.get("status", {}).get("phase") == "Ready"

    eventually(ready, timeout=30)
    obj = _get(gadgets, name)
    assert obj is not None
    assert obj["status"]["created"] == {"size": 4}  # the handler's result, patched into status
    assert obj["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
    gadgets.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, {"spec": {"size": 5}})
    eventually(lambda: (_get(gadgets, name) or {}).get("status", {}).get("observedSize") == 5, timeout=30)

    def posted() -> bool:  # kopf.info() posts an Event about the object
        return any(e.involved_object.name == name for e in core.list_namespaced_event("default").items)

    eventually(posted, timeout=30)
    gadgets.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    eventually(lambda: _get(gadgets, name) is None, timeout=30)  # kopf removed its finalizer
