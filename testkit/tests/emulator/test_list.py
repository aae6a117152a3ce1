"""LIST: label and field selectors, namespaced and all-namespaces, resourceVersion, paging."""

from __future__ import annotations

import uuid

import kubernetes
import pytest
from kubernetes.client import ApiException

from .helpers import lease, status_of


@pytest.fixture
def labelled(leases: kubernetes.client.CoordinationV1Api, namespace: str) -> str:
    leases.create_namespaced_lease(namespace, lease("a", app="x", tier="web"))
    leases.create_namespaced_lease(namespace, lease("b", app="y", tier="db"))
    leases.create_namespaced_lease(namespace, lease("c", app="z"))
    return namespace


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=x", ["a"]),
        ("app==x", ["a"]),
        ("app!=x", ["b", "c"]),
        ("app in (x, y)", ["a", "b"]),
        ("app notin (x,y)", ["c"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c"]),
        ("tier,app!=y", ["a"]),
        ("", ["a", "b", "c"]),
        ("missing=1", []),
    ],
)
def test_label_selectors(
    leases: kubernetes.client.CoordinationV1Api, labelled: str, selector: str, expected: list[str]
) -> None:
    found = leases.list_namespaced_lease(labelled, label_selector=selector)
    assert [item.metadata.name for item in found.items] == expected


def test_malformed_label_selector_answers_400(leases: kubernetes.client.CoordinationV1Api, labelled: str) -> None:
    with pytest.raises(ApiException) as caught:
        leases.list_namespaced_lease(labelled, label_selector="app in x")
    assert caught.value.status == 400 and status_of(caught.value)["reason"] == "BadRequest"


def test_field_selectors(leases: kubernetes.client.CoordinationV1Api, labelled: str) -> None:
    assert [
        i.metadata.name for i in leases.list_namespaced_lease(labelled, field_selector="metadata.name=b").items
    ] == ["b"]
    assert [
        i.metadata.name for i in leases.list_namespaced_lease(labelled, field_selector="metadata.name!=b").items
    ] == ["a", "c"]
    everywhere = leases.list_lease_for_all_namespaces(field_selector=f"metadata.namespace={labelled}")
    assert len(everywhere.items) == 3
    with pytest.raises(ApiException) as caught:
        leases.list_namespaced_lease(labelled, field_selector="spec.holderIdentity=a")
    assert caught.value.status == 400


def test_all_namespaces_list_and_namespaced_list(
    leases: kubernetes.client.CoordinationV1Api, core: kubernetes.client.CoreV1Api, labelled: str
) -> None:
    other = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": other}})
    leases.create_namespaced_lease(other, lease("a", app="x"))
    assert len(leases.list_namespaced_lease(other).items) == 1
    everywhere = leases.list_lease_for_all_namespaces(label_selector="app=x")
    assert {(i.metadata.namespace, i.metadata.name) for i in everywhere.items} >= {(labelled, "a"), (other, "a")}


def test_list_reports_the_current_resource_version(leases: kubernetes.client.CoordinationV1Api, labelled: str) -> None:
    listed = leases.list_namespaced_lease(labelled)
    newest = max(int(item.metadata.resource_version) for item in listed.items)
    assert int(listed.metadata.resource_version) >= newest
    changed = leases.patch_namespaced_lease("a", labelled, {"spec": {"holderIdentity": "q"}})
    assert int(changed.metadata.resource_version) > int(listed.metadata.resource_version)


def test_limit_and_continue_page_through_everything(leases: kubernetes.client.CoordinationV1Api, labelled: str) -> None:
    first = leases.list_namespaced_lease(labelled, limit=2)
    assert [i.metadata.name for i in first.items] == ["a", "b"]
    assert first.metadata._continue
    second = leases.list_namespaced_lease(labelled, limit=2, _continue=first.metadata._continue)
    assert [i.metadata.name for i in second.items] == ["c"]
    assert not second.metadata._continue


def test_field_selectors_a_builtin_kind_supports(core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    for name, target in (("e1", "lease-a"), ("e2", "lease-b")):
        core.create_namespaced_event(
            namespace,
            {
                "metadata": {"name": name},
                "reason": "Elected",
                "type": "Normal",
                "involvedObject": {"kind": "Lease", "name": target, "namespace": namespace},
            },
        )
    found = core.list_namespaced_event(namespace, field_selector="involvedObject.name=lease-b,reason=Elected")
    assert [e.metadata.name for e in found.items] == ["e2"]
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_config_map(namespace, field_selector="involvedObject.name=x")
    assert caught.value.status == 400
    assert status_of(caught.value)["message"] == "field label not supported: involvedObject.name"
