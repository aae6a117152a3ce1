"""DELETE: finalizers and deletionTimestamp, preconditions, propagation, garbage
collection by ownerReferences, namespace deletion."""

from __future__ import annotations

import kubernetes
import pytest
from kubernetes.client import ApiException
from tests.helpers import eventually

from kubecoord_testkit.emulator import ApiEmulator

from .helpers import lease, status_of


def _owned(name: str, owner: object, **extra: object) -> dict[str, object]:
    meta = owner.metadata  # type: ignore[attr-defined]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "uid": meta.uid}
    return {"metadata": {"name": name, "ownerReferences": [ref], **extra}}


def _exists(core: kubernetes.client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_config_map(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_delete_answers_a_success_status_and_the_object_is_gone(
    core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    result = core.delete_namespaced_config_map("c", namespace)
    assert result["status"] == "Success" and result["details"]["uid"] == created.metadata.uid
    assert result["kind"] == "Status" and result["details"]["name"] == "c"
    assert not _exists(core, namespace, "c")
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_config_map("c", namespace)
    assert caught.value.status == 404


def test_finalizers_hold_the_object_until_removed(
    api_emulator: ApiEmulator, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c", "finalizers": ["kubecoord.dev/cleanup"]}})
    core.delete_namespaced_config_map("c", namespace)
    held = core.read_namespaced_config_map("c", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    with pytest.raises(ApiException) as caught:  # no new finalizers on an object being deleted
        core.patch_namespaced_config_map("c", namespace, {"metadata": {"finalizers": ["a/b", "kubecoord.dev/cleanup"]}})
    assert caught.value.status == 422
    core.patch_namespaced_config_map("c", namespace, {"data": {"still": "writable"}})
    core.patch_namespaced_config_map("c", namespace, {"metadata": {"finalizers": None}})
    assert not _exists(core, namespace, "c")


def test_finalizer_removal_by_replace_deletes_and_watch_sees_deleted(
    core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c", "finalizers": ["kubecoord.dev/x"]}})
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.delete_namespaced_config_map("c", namespace)
    held = core.read_namespaced_config_map("c", namespace)
    held.metadata.finalizers = []
    core.replace_namespaced_config_map("c", namespace, held)
    w = kubernetes.watch.Watch()
    kinds = []
    for event in w.stream(core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=10):
        kinds.append(event["type"])
        if len(kinds) == 2:
            w.stop()
    assert kinds == ["MODIFIED", "DELETED"]


def test_delete_preconditions_answer_409(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    core.patch_namespaced_config_map("c", namespace, {"data": {"a": "1"}})
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_config_map(
            "c", namespace, body={"preconditions": {"resourceVersion": created.metadata.resource_version}}
        )
    assert caught.value.status == 409 and status_of(caught.value)["reason"] == "Conflict"
    assert "Precondition failed: ResourceVersion in precondition" in status_of(caught.value)["message"]
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_config_map("c", namespace, body={"preconditions": {"uid": "not-the-uid"}})
    assert caught.value.status == 409
    core.delete_namespaced_config_map("c", namespace, body={"preconditions": {"uid": created.metadata.uid}})
    assert not _exists(core, namespace, "c")


def test_garbage_collection_deletes_dependents_of_a_deleted_owner(
    core: kubernetes.client.CoreV1Api, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    other = core.create_namespaced_config_map(namespace, {"metadata": {"name": "other"}})
    core.create_namespaced_config_map(namespace, _owned("child", owner))
    leases.create_namespaced_lease(namespace, {**lease("l"), "metadata": _owned("l", owner)["metadata"]})
    two_owners = _owned("shared", owner)
    two_owners["metadata"]["ownerReferences"].append(  # type: ignore[index]
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": other.metadata.uid}
    )
    core.create_namespaced_config_map(namespace, two_owners)
    core.delete_namespaced_config_map("owner", namespace)
    eventually(lambda: not _exists(core, namespace, "child"))
    eventually(lambda: not leases.list_namespaced_lease(namespace).items)
    assert _exists(core, namespace, "shared")  # one owner is still alive


def test_orphan_propagation_keeps_dependents_without_the_owner_reference(
    core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(namespace, _owned("child", owner))
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Orphan")
    eventually(lambda: not _exists(core, namespace, "owner"))
    assert not core.read_namespaced_config_map("child", namespace).metadata.owner_references


def test_foreground_propagation_deletes_dependents_first(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(namespace, _owned("child", owner, finalizers=["kubecoord.dev/hold"]))
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Foreground")
    eventually(lambda: core.read_namespaced_config_map("child", namespace).metadata.deletion_timestamp is not None)
    held = core.read_namespaced_config_map("owner", namespace)
    assert "foregroundDeletion" in held.metadata.finalizers
    core.patch_namespaced_config_map("child", namespace, {"metadata": {"finalizers": None}})
    eventually(lambda: not _exists(core, namespace, "owner"))


def test_deleting_a_namespace_deletes_its_contents_then_itself(
    core: kubernetes.client.CoreV1Api, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    leases.create_namespaced_lease(namespace, lease("a"))
    core.delete_namespace(namespace)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "late"}})
    assert caught.value.status in (403, 404)

    def namespace_gone() -> bool:
        return namespace not in {ns.metadata.name for ns in core.list_namespace().items}

    eventually(namespace_gone)
    assert not leases.list_namespaced_lease(namespace).items


def test_deletecollection_by_label(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "a", "labels": {"k": "1"}}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "b", "labels": {"k": "2"}}})
    core.delete_collection_namespaced_config_map(namespace, label_selector="k=1")
    assert [c.metadata.name for c in core.list_namespaced_config_map(namespace).items] == ["b"]
