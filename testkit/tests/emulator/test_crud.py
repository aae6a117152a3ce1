"""Create, get, replace: server-set metadata, status codes and Status bodies."""

from __future__ import annotations

import datetime

import kubernetes
import pytest
from kubernetes.client import ApiException

from kubecoord_testkit.emulator import ApiEmulator

from .helpers import lease, status_of


def test_create_sets_server_metadata_and_answers_201(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    created, code, _ = leases.create_namespaced_lease_with_http_info(namespace, lease("a"))
    assert code == 201
    meta = created.metadata
    assert meta.namespace == namespace
    assert meta.uid and meta.resource_version.isdigit()
    assert meta.generation == 1
    assert abs(meta.creation_timestamp - datetime.datetime.now(datetime.UTC)) < datetime.timedelta(minutes=5)
    fetched = leases.read_namespaced_lease("a", namespace)
    assert fetched.metadata.uid == meta.uid and fetched.spec.holder_identity == "a"


def test_resource_versions_are_one_increasing_counter_across_resources(
    leases: kubernetes.client.CoordinationV1Api, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    first = int(leases.create_namespaced_lease(namespace, lease("a")).metadata.resource_version)
    second = int(core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}}).metadata.resource_version)
    third = int(
        leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": "b"}}).metadata.resource_version
    )
    assert first < second < third


def test_duplicate_create_answers_409_already_exists(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    leases.create_namespaced_lease(namespace, lease("x"))
    with pytest.raises(ApiException) as caught:
        leases.create_namespaced_lease(namespace, lease("x"))
    assert caught.value.status == 409
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'leases.coordination.k8s.io "x" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "x", "group": "coordination.k8s.io", "kind": "leases"},
        "code": 409,
    }


def test_generate_name(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    one = core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "kv-"}})
    two = core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "kv-"}})
    assert one.metadata.name.startswith("kv-") and len(one.metadata.name) == len("kv-") + 5
    assert one.metadata.name != two.metadata.name


def test_namespace_comes_from_the_url_and_must_exist(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    assert created.metadata.namespace == namespace
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("no-such-namespace", {"metadata": {"name": "c"}})
    assert caught.value.status == 404
    assert status_of(caught.value)["message"] == 'namespaces "no-such-namespace" not found'
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "d", "namespace": "other"}})
    assert caught.value.status == 400


def test_get_missing_answers_404_not_found(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("missing", namespace)
    assert caught.value.status == 404
    body = status_of(caught.value)
    assert body["reason"] == "NotFound" and body["message"] == 'configmaps "missing" not found'
    assert body["details"] == {"name": "missing", "kind": "configmaps"}


def test_replace_with_stale_resource_version_answers_409_conflict(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    created = leases.create_namespaced_lease(namespace, lease("x"))
    created.spec.holder_identity = "b"
    updated = leases.replace_namespaced_lease("x", namespace, created)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    created.spec.holder_identity = "c"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as caught:
        leases.replace_namespaced_lease("x", namespace, created)
    assert caught.value.status == 409
    body = status_of(caught.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "x": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert leases.read_namespaced_lease("x", namespace).spec.holder_identity == "b"


def test_replace_without_resource_version_is_unconditional(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    leases.create_namespaced_lease(namespace, lease("x"))
    leases.patch_namespaced_lease("x", namespace, {"spec": {"holderIdentity": "b"}})
    replaced = leases.replace_namespaced_lease("x", namespace, lease("x", holder="c"))
    assert replaced.spec.holder_identity == "c"


def test_replace_keeps_server_owned_metadata_and_noop_keeps_the_resource_version(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    created = leases.create_namespaced_lease(namespace, lease("x"))
    body = lease("x", holder="b")
    body["metadata"]["uid"] = "forged"
    replaced = leases.replace_namespaced_lease("x", namespace, body)
    assert replaced.metadata.uid == created.metadata.uid
    assert replaced.metadata.creation_timestamp == created.metadata.creation_timestamp
    again = leases.replace_namespaced_lease("x", namespace, replaced)
    assert again.metadata.resource_version == replaced.metadata.resource_version


def test_invalid_names_labels_and_oversized_configmaps_answer_422(
    core: kubernetes.client.CoreV1Api, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    with pytest.raises(ApiException) as caught:
        leases.create_namespaced_lease(namespace, lease("Not_Valid"))
    body = status_of(caught.value)
    assert caught.value.status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('Lease.coordination.k8s.io "Not_Valid" is invalid: metadata.name: Invalid value')
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    with pytest.raises(ApiException) as caught:
        leases.create_namespaced_lease(namespace, lease("ok", **{"kubecoord.dev/group": "x" * 64}))
    assert caught.value.status == 422
    big = {"metadata": {"name": "big"}, "data": {"a": "x" * (1024 * 1024)}}
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(namespace, big)
    assert caught.value.status == 422
    assert status_of(caught.value)["message"] == (
        'ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes'
    )
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "k"}, "data": {"a/b": "x"}})
    assert caught.value.status == 422
    assert core.create_namespaced_config_map(namespace, {"metadata": {"name": "fits"}, "data": {"a": "x" * 1000000}})


def test_namespaces_list_get_create_and_default_exists(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", namespace} <= names
    assert core.read_namespace("default").status.phase == "Active"
    with pytest.raises(ApiException) as caught:
        core.create_namespace({"metadata": {"name": namespace}})
    assert caught.value.status == 409
    assert status_of(caught.value)["message"] == f'namespaces "{namespace}" already exists'


def test_objects_helper_shows_what_is_stored(
    api_emulator: ApiEmulator, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    leases.create_namespaced_lease(namespace, lease("a"))
    stored = api_emulator.objects("leases", namespace)
    assert [obj["metadata"]["name"] for obj in stored] == ["a"]
    assert stored[0]["spec"]["holderIdentity"] == "a"
    assert api_emulator.objects("leases.coordination.k8s.io", namespace) == stored
