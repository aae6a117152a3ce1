"""CRDs: served once created, discovery, the status subresource, generation, deletion."""

from __future__ import annotations

import json
import sys
import types
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
import urllib3
from kubernetes.client import ApiException
from tests.helpers import eventually

from kubecoord_testkit.emulator import ApiEmulator, admitting

from .helpers import request, status_of

GROUP = "example.kubecoord.dev"


def crd(plural: str, *, status: bool = True, scope: str = "Namespaced") -> dict[str, Any]:
    kind = plural[:-1].capitalize()
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "shortNames": [plural[:3]]},
            "versions": [version],
        },
    }


@pytest.fixture
def extensions(api_client: kubernetes.client.ApiClient) -> kubernetes.client.ApiextensionsV1Api:
    return kubernetes.client.ApiextensionsV1Api(api_client)


@pytest.fixture
def widgets(extensions: kubernetes.client.ApiextensionsV1Api) -> Iterator[str]:
    """A fresh CRD with a status subresource; its plural."""
    plural = f"w{uuid.uuid4().hex[:8]}s"
    extensions.create_custom_resource_definition(crd(plural))
    yield plural


def widget(plural: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": plural[:-1].capitalize(), "metadata": {"name": name}, "spec": spec}


def test_crd_is_established_and_its_resource_is_discoverable(
    api_emulator: ApiEmulator, extensions: kubernetes.client.ApiextensionsV1Api, widgets: str
) -> None:
    stored = extensions.read_custom_resource_definition(f"{widgets}.{GROUP}")
    conditions = {c.type: c.status for c in stored.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert stored.status.accepted_names.plural == widgets
    code, groups = request(api_emulator, "GET", "/apis")
    assert code == 200 and GROUP in {g["name"] for g in groups["groups"]}
    code, group = request(api_emulator, "GET", f"/apis/{GROUP}")
    assert group["preferredVersion"]["groupVersion"] == f"{GROUP}/v1"
    code, resources = request(api_emulator, "GET", f"/apis/{GROUP}/v1")
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name[widgets]["kind"] == widgets[:-1].capitalize()
    assert by_name[widgets]["namespaced"] is True
    assert by_name[widgets]["shortNames"] == [widgets[:3]]
    assert by_name[widgets]["singularName"] == widgets[:-1]
    assert set(by_name[widgets]["verbs"]) >= {"create", "get", "list", "watch", "patch", "update", "delete"}
    assert f"{widgets}/status" in by_name


def test_custom_resources_crud_with_201_and_generation(
    custom: kubernetes.client.CustomObjectsApi, widgets: str, namespace: str
) -> None:
    created = custom.create_namespaced_custom_object(GROUP, "v1", namespace, widgets, widget(widgets, "a", size=1))
    assert created is not None and created["metadata"]["generation"] == 1  # 201: the client maps only 201
    patched = custom.patch_namespaced_custom_object(GROUP, "v1", namespace, widgets, "a", {"spec": {"size": 2}})
    assert patched["metadata"]["generation"] == 2
    labelled = custom.patch_namespaced_custom_object(
        GROUP, "v1", namespace, widgets, "a", {"metadata": {"labels": {"x": "y"}}}
    )
    assert labelled["metadata"]["generation"] == 2  # metadata changes do not bump it
    listed = custom.list_namespaced_custom_object(GROUP, "v1", namespace, widgets, label_selector="x=y")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["a"]
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(GROUP, "v1", namespace, widgets, widget(widgets, "a"))
    assert caught.value.status == 409
    assert status_of(caught.value)["message"] == f'{widgets}.{GROUP} "a" already exists'


def test_status_subresource_splits_status_from_the_main_resource(
    custom: kubernetes.client.CustomObjectsApi, widgets: str, namespace: str
) -> None:
    body = {**widget(widgets, "a", size=1), "status": {"ready": True}}
    created = custom.create_namespaced_custom_object(GROUP, "v1", namespace, widgets, body)
    assert "status" not in created  # create cannot set status
    with_status = custom.patch_namespaced_custom_object_status(
        GROUP, "v1", namespace, widgets, "a", {"status": {"ready": True}, "spec": {"size": 9}}
    )
    assert with_status["status"] == {"ready": True}
    assert with_status["spec"] == {"size": 1}  # a status write changes only status
    assert with_status["metadata"]["generation"] == 1
    main = custom.patch_namespaced_custom_object(
        GROUP, "v1", namespace, widgets, "a", {"status": {"ready": False}, "spec": {"size": 3}}
    )
    assert main["status"] == {"ready": True} and main["spec"] == {"size": 3}  # main writes ignore status
    replaced = custom.replace_namespaced_custom_object_status(
        GROUP, "v1", namespace, widgets, "a", {**main, "status": {"ready": False}}
    )
    assert replaced["status"] == {"ready": False}
    stale = {**main, "status": {"ready": True}}
    with pytest.raises(ApiException) as caught:
        custom.replace_namespaced_custom_object_status(GROUP, "v1", namespace, widgets, "a", stale)
    assert caught.value.status == 409


def test_without_status_subresource_status_is_part_of_the_object(
    custom: kubernetes.client.CustomObjectsApi, extensions: kubernetes.client.ApiextensionsV1Api, namespace: str
) -> None:
    plural = f"p{uuid.uuid4().hex[:8]}s"
    extensions.create_custom_resource_definition(crd(plural, status=False))
    created = custom.create_namespaced_custom_object(
        GROUP, "v1", namespace, plural, {**widget(plural, "a"), "status": {"x": 1}}
    )
    assert created["status"] == {"x": 1}
    patched = custom.patch_namespaced_custom_object(GROUP, "v1", namespace, plural, "a", {"status": {"x": 2}})
    assert patched["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object_status(GROUP, "v1", namespace, plural, "a", {"status": {"x": 3}})
    assert caught.value.status == 404


def test_cluster_scoped_custom_resources(
    custom: kubernetes.client.CustomObjectsApi, extensions: kubernetes.client.ApiextensionsV1Api
) -> None:
    plural = f"c{uuid.uuid4().hex[:8]}s"
    extensions.create_custom_resource_definition(crd(plural, scope="Cluster"))
    created = custom.create_cluster_custom_object(GROUP, "v1", plural, widget(plural, "a"))
    assert "namespace" not in created["metadata"]
    assert custom.get_cluster_custom_object(GROUP, "v1", plural, "a")["metadata"]["uid"] == created["metadata"]["uid"]


def test_unknown_resources_answer_404_until_their_crd_exists(api_emulator: ApiEmulator) -> None:
    code, body = request(api_emulator, "GET", f"/apis/{GROUP}/v1/namespaces/default/nothings")
    assert code == 404 and body["reason"] == "NotFound" and body["kind"] == "Status"
    code, _ = request(api_emulator, "GET", "/apis/nothing.example.com")
    assert code == 404


def test_invalid_crd_answers_422(extensions: kubernetes.client.ApiextensionsV1Api) -> None:
    bad = crd("bads")
    bad["metadata"]["name"] = "wrong.example.com"
    with pytest.raises(ApiException) as caught:
        extensions.create_custom_resource_definition(bad)
    assert caught.value.status == 422


def test_deleting_a_crd_deletes_its_resources_and_its_endpoints(
    api_emulator: ApiEmulator,
    custom: kubernetes.client.CustomObjectsApi,
    extensions: kubernetes.client.ApiextensionsV1Api,
    widgets: str,
    namespace: str,
) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", namespace, widgets, widget(widgets, "a"))
    extensions.delete_custom_resource_definition(f"{widgets}.{GROUP}")

    def gone() -> bool:
        return request(api_emulator, "GET", f"/apis/{GROUP}/v1/namespaces/{namespace}/{widgets}")[0] == 404

    eventually(gone)
    _, resources = request(api_emulator, "GET", f"/apis/{GROUP}/v1")
    assert widgets not in {r["name"] for r in resources.get("resources", [])}


def test_admission_hook_is_called_for_custom_resource_writes(
    monkeypatch: pytest.MonkeyPatch, custom: kubernetes.client.CustomObjectsApi, widgets: str, namespace: str
) -> None:
    """The call site contract with the admission module: defaults applied, Invalid -> 422."""
    calls: list[tuple[str | None, bool]] = []

    class Invalid(Exception):
        def __init__(self, status_body: dict[str, Any]) -> None:
            super().__init__(status_body)
            self.status_body = status_body

    def admit(crd: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None, sub: str | None) -> dict[str, Any]:
        calls.append((sub, old is not None))
        if obj.get("spec", {}).get("size", 0) < 0:
            raise Invalid(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": 422,
                    "reason": "Invalid",
                    "message": "spec.size: Invalid value: must be >= 0",
                }
            )
        obj.setdefault("spec", {}).setdefault("colour", "blue")
        return obj

    fake = types.ModuleType(admitting.MODULE)
    fake.admit = admit  # type: ignore[attr-defined]
    fake.Invalid = Invalid  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, admitting.MODULE, fake)
    monkeypatch.setattr(admitting, "_cached", [])
    created = custom.create_namespaced_custom_object(GROUP, "v1", namespace, widgets, widget(widgets, "a", size=1))
    assert created["spec"] == {"size": 1, "colour": "blue"}
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(GROUP, "v1", namespace, widgets, "a", {"spec": {"size": -1}})
    assert caught.value.status == 422 and status_of(caught.value)["message"] == "spec.size: Invalid value: must be >= 0"
    custom.patch_namespaced_custom_object_status(GROUP, "v1", namespace, widgets, "a", {"status": {"ok": 1}})
    assert calls == [(None, False), (None, True), ("status", True)]


def test_tables_for_kubectl_get_show_printer_columns(
    api_emulator: ApiEmulator,
    custom: kubernetes.client.CustomObjectsApi,
    extensions: kubernetes.client.ApiextensionsV1Api,
    namespace: str,
) -> None:
    plural = f"t{uuid.uuid4().hex[:8]}s"
    definition = crd(plural)
    definition["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Leader", "type": "string", "jsonPath": ".status.leader"},
        {"name": "Epoch", "type": "integer", "jsonPath": ".status.epoch"},
        {"name": "First", "type": "string", "jsonPath": ".spec.items[0]", "priority": 1},
    ]
    extensions.create_custom_resource_definition(definition)
    custom.create_namespaced_custom_object(
        GROUP, "v1", namespace, plural, {**widget(plural, "a"), "spec": {"items": ["x"]}}
    )
    custom.patch_namespaced_custom_object_status(
        GROUP, "v1", namespace, plural, "a", {"status": {"leader": "pod-a", "epoch": 3}}
    )
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    response = urllib3.request(
        "GET",
        f"{api_emulator.url}/apis/{GROUP}/v1/namespaces/{namespace}/{plural}",
        headers={"Authorization": f"Bearer {api_emulator.admin_token}", "Accept": accept},
    )
    table = json.loads(response.data)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Leader", "Epoch", "First", "Age"]
    cells = table["rows"][0]["cells"]
    assert cells[:4] == ["a", "pod-a", 3, "x"] and cells[4].endswith(("s", "m"))
    assert table["rows"][0]["object"]["metadata"]["name"] == "a"


def test_selectable_fields_of_a_crd_work_in_field_selectors(
    custom: kubernetes.client.CustomObjectsApi, extensions: kubernetes.client.ApiextensionsV1Api, namespace: str
) -> None:
    plural = f"s{uuid.uuid4().hex[:8]}s"
    definition = crd(plural)
    definition["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.colour"}]
    extensions.create_custom_resource_definition(definition)
    for name, colour in (("a", "red"), ("b", "blue")):
        custom.create_namespaced_custom_object(GROUP, "v1", namespace, plural, widget(plural, name, colour=colour))
    found = custom.list_namespaced_custom_object(GROUP, "v1", namespace, plural, field_selector="spec.colour=blue")
    assert [item["metadata"]["name"] for item in found["items"]] == ["b"]
    with pytest.raises(ApiException) as caught:
        custom.list_namespaced_custom_object(GROUP, "v1", namespace, plural, field_selector="spec.size=1")
    assert caught.value.status == 400
