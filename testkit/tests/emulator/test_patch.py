"""PATCH: merge, JSON and strategic merge patches, resourceVersion preconditions, apply."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kubecoord_testkit.emulator import ApiEmulator

from .helpers import lease, request, status_of


def _patch(api: ApiEmulator, path: str, body: object, content_type: str) -> tuple[int, Any]:
    """A raw PATCH, to choose the content type exactly."""
    code, answer = request(api, "PATCH", path, body, content_type)
    return code, answer


def test_merge_patch_merges_and_null_deletes(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}}
    )
    patched = core.patch_namespaced_config_map(
        "c", namespace, {"metadata": {"labels": {"b": "2"}}, "data": {"x": None, "z": "3"}}
    )
    assert patched.data == {"y": "2", "z": "3"}
    assert patched.metadata.labels == {"a": "1", "b": "2"}


def test_merge_patch_with_a_stale_resource_version_answers_409(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    created = leases.create_namespaced_lease(namespace, lease("x"))
    leases.patch_namespaced_lease("x", namespace, {"spec": {"holderIdentity": "b"}})
    with pytest.raises(ApiException) as caught:
        leases.patch_namespaced_lease(
            "x",
            namespace,
            {"metadata": {"resourceVersion": created.metadata.resource_version}, "spec": {"holderIdentity": "c"}},
        )
    assert caught.value.status == 409 and status_of(caught.value)["reason"] == "Conflict"
    current = leases.read_namespaced_lease("x", namespace)
    ok = leases.patch_namespaced_lease(
        "x",
        namespace,
        {"metadata": {"resourceVersion": current.metadata.resource_version}, "spec": {"holderIdentity": "c"}},
    )
    assert ok.spec.holder_identity == "c"


def test_json_patch_and_a_failed_test_op_answers_422(
    api_emulator: ApiEmulator, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    leases.create_namespaced_lease(namespace, lease("x"))
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/x"
    code, body = _patch(
        api_emulator,
        path,
        [
            {"op": "test", "path": "/spec/holderIdentity", "value": "a"},
            {"op": "replace", "path": "/spec/holderIdentity", "value": "b"},
            {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}},
        ],
        "application/json-patch+json",
    )
    assert code == 200 and body["spec"]["holderIdentity"] == "b"
    code, body = _patch(
        api_emulator,
        path,
        [
            {"op": "test", "path": "/spec/holderIdentity", "value": "a"},
            {"op": "replace", "path": "/spec/holderIdentity", "value": "c"},
        ],
        "application/json-patch+json",
    )
    assert code == 422 and body["reason"] == "Invalid" and body["kind"] == "Status"
    code, body = _patch(api_emulator, path, [{"op": "remove", "path": "/spec/missing"}], "application/json-patch+json")
    assert code == 422
    assert leases.read_namespaced_lease("x", namespace).spec.holder_identity == "b"


def test_json_patch_through_the_client(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    """The client sends a list body as json-patch."""
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    patched = core.patch_namespaced_config_map("c", namespace, [{"op": "add", "path": "/data/b", "value": "2"}])
    assert patched.data == {"a": "1", "b": "2"}


def test_strategic_merge_patch_is_a_merge_patch_with_lists_replaced(
    api_emulator: ApiEmulator, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "c", "finalizers": ["a/b", "c/d"]}, "data": {"a": "1"}}
    )
    code, body = _patch(
        api_emulator,
        f"/api/v1/namespaces/{namespace}/configmaps/c",
        {"metadata": {"finalizers": ["e/f"]}, "data": {"b": "2"}},
        "application/strategic-merge-patch+json",
    )
    assert code == 200
    assert body["metadata"]["finalizers"] == ["e/f"]
    assert body["data"] == {"a": "1", "b": "2"}
    core.patch_namespaced_config_map("c", namespace, {"metadata": {"finalizers": None}})


def test_server_side_apply_creates_then_merges(api_emulator: ApiEmulator, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/applied?fieldManager=test"
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: '1'\n"
    code, body = _patch(api_emulator, path, manifest, "application/apply-patch+yaml")
    assert code == 201 and body["data"] == {"a": "1"}
    code, body = _patch(api_emulator, path, manifest.replace("'1'", "'2'"), "application/apply-patch+yaml")
    assert code == 200 and body["data"] == {"a": "2"}


def test_patch_of_a_missing_object_answers_404(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_config_map("nope", namespace, {"data": {"a": "1"}})
    assert caught.value.status == 404


def test_requests_are_recorded_with_their_verbs(
    api_emulator: ApiEmulator, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    api_emulator.reset_requests()
    leases.create_namespaced_lease(namespace, lease("x"))
    leases.patch_namespaced_lease("x", namespace, {"spec": {"holderIdentity": "b"}})
    leases.read_namespaced_lease("x", namespace)
    leases.list_namespaced_lease(namespace, label_selector="a=b")
    mine = [r for r in api_emulator.requests if r.namespace == namespace]
    assert [(r.verb, r.resource, r.name, r.status) for r in mine] == [
        ("create", "leases", None, 201),
        ("patch", "leases", "x", 200),
        ("get", "leases", "x", 200),
        ("list", "leases", None, 200),
    ]
    assert mine[-1].query == {"labelSelector": "a=b"} and mine[0].method == "POST"
