"""WATCH through the official client's kubernetes.watch.Watch, as the backend uses it."""

from __future__ import annotations

import threading
from typing import Any

import kubernetes
import pytest
from kubernetes import watch
from tests.helpers import eventually

from kubecoord_testkit.emulator import ApiEmulator

from .helpers import first_event, lease, request, status_of


def _events(
    leases: kubernetes.client.CoordinationV1Api, namespace: str, count: int, **kwargs: Any
) -> list[tuple[str, str, str]]:
    """The first ``count`` events (type, name, holder) of a watch, or fewer at its timeout."""
    seen = []
    w = watch.Watch()
    for event in w.stream(leases.list_namespaced_lease, namespace, timeout_seconds=10, **kwargs):
        obj = event["object"]
        seen.append((event["type"], obj.metadata.name, obj.spec.holder_identity if obj.spec else None))
        if len(seen) == count:
            w.stop()
    return seen


def test_watch_from_a_list_resource_version_sees_every_later_change_once_in_order(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    leases.create_namespaced_lease(namespace, lease("a"))
    listed = leases.list_namespaced_lease(namespace)
    leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": "b"}})
    leases.create_namespaced_lease(namespace, lease("c", holder="c"))
    leases.delete_namespaced_lease("a", namespace)
    events = _events(leases, namespace, 3, resource_version=listed.metadata.resource_version)
    assert events == [("MODIFIED", "a", "b"), ("ADDED", "c", "c"), ("DELETED", "a", "b")]


def test_watch_without_resource_version_starts_with_synthetic_added_then_goes_live(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    leases.create_namespaced_lease(namespace, lease("a"))
    seen: list[tuple[str, str, str]] = []
    started = threading.Event()

    def consume() -> None:
        w = watch.Watch()
        for event in w.stream(leases.list_namespaced_lease, namespace, timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name, event["object"].spec.holder_identity))
            started.set()
            if len(seen) == 2:
                w.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    assert started.wait(10)
    leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": "z"}})
    thread.join(20)
    assert seen == [("ADDED", "a", "a"), ("MODIFIED", "a", "z")]


def test_deleted_event_carries_the_last_state_at_a_new_resource_version(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    created = leases.create_namespaced_lease(namespace, lease("a"))
    leases.delete_namespaced_lease("a", namespace)
    w = watch.Watch()
    stream = w.stream(
        leases.list_namespaced_lease, namespace, resource_version=created.metadata.resource_version, timeout_seconds=10
    )
    event = next(stream)
    w.stop()
    assert event["type"] == "DELETED" and event["object"].spec.holder_identity == "a"
    assert int(event["object"].metadata.resource_version) > int(created.metadata.resource_version)


def test_watch_from_a_compacted_resource_version_answers_410_expired(
    api_emulator: ApiEmulator, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    created = leases.create_namespaced_lease(namespace, lease("a"))
    leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": "b"}})
    api_emulator.compact()
    with pytest.raises(kubernetes.client.ApiException) as caught:
        _events(leases, namespace, 1, resource_version=created.metadata.resource_version)
    assert caught.value.status == 410
    # The raw stream: one ERROR event holding a 410 Expired Status.
    raw = leases.list_namespaced_lease(
        namespace, watch=True, resource_version=created.metadata.resource_version, _preload_content=False
    )
    event = first_event(raw)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    assert event["object"]["kind"] == "Status"
    # A watch from a current resource version still works after compaction.
    current = leases.list_namespaced_lease(namespace).metadata.resource_version
    leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": "c"}})
    assert _events(leases, namespace, 1, resource_version=current) == [("MODIFIED", "a", "c")]


def test_list_with_an_expired_continue_token_answers_410(
    api_emulator: ApiEmulator, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    leases.create_namespaced_lease(namespace, lease("a"))
    leases.create_namespaced_lease(namespace, lease("b"))
    page = leases.list_namespaced_lease(namespace, limit=1)
    leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": "x"}})
    api_emulator.compact()
    with pytest.raises(kubernetes.client.ApiException) as caught:
        leases.list_namespaced_lease(namespace, limit=1, _continue=page.metadata._continue)
    assert caught.value.status == 410


def test_exact_list_from_a_compacted_resource_version_answers_410(
    api_emulator: ApiEmulator, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    old = leases.create_namespaced_lease(namespace, lease("a")).metadata.resource_version
    kept = leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": "b"}}).metadata.resource_version
    api_emulator.compact()
    leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": "c"}})
    leases.create_namespaced_lease(namespace, lease("later", holder="later"))
    with pytest.raises(kubernetes.client.ApiException) as caught:
        leases.list_namespaced_lease(namespace, resource_version=old, resource_version_match="Exact")
    assert caught.value.status == 410 and status_of(caught.value)["reason"] == "Expired"
    # A retained resourceVersion lists the objects as they were then.
    then = leases.list_namespaced_lease(namespace, resource_version=kept, resource_version_match="Exact")
    assert [(i.metadata.name, i.spec.holder_identity) for i in then.items] == [("a", "b")]
    assert then.metadata.resource_version == kept
    # Without Exact, an older resourceVersion means "not older than": the current list.
    now = leases.list_namespaced_lease(namespace, resource_version=old)
    assert [(i.metadata.name, i.spec.holder_identity) for i in now.items] == [("a", "c"), ("later", "later")]


def test_a_malformed_resource_version_answers_400(api_emulator: ApiEmulator, namespace: str) -> None:
    code, body = request(api_emulator, "GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=1&resourceVersion=x")
    assert code == 400 and body["reason"] == "BadRequest"


def test_timeout_seconds_ends_the_stream(leases: kubernetes.client.CoordinationV1Api, namespace: str) -> None:
    w = watch.Watch()
    events = list(
        w.stream(
            leases.list_namespaced_lease,
            namespace,
            timeout_seconds=1,
            resource_version=leases.list_namespaced_lease(namespace).metadata.resource_version,
        )
    )
    assert events == []


def test_bookmarks_carry_the_current_resource_version() -> None:
    with ApiEmulator(bookmark_interval=0.2) as api:
        client = kubernetes.client.ApiClient(
            kubernetes.client.Configuration(host=api.url, api_key={"authorization": f"Bearer {api.admin_token}"})
        )
        leases = kubernetes.client.CoordinationV1Api(client)
        rv = leases.create_namespaced_lease("default", lease("a")).metadata.resource_version
        raw = leases.list_namespaced_lease(
            "default",
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=rv,
            timeout_seconds=5,
            _preload_content=False,
        )
        event = first_event(raw)
        client.close()
    assert event["type"] == "BOOKMARK"
    assert event["object"]["kind"] == "Lease" and event["object"]["metadata"]["resourceVersion"] == rv


def test_selectors_on_watches_and_objects_leaving_the_selection(
    leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    rv = leases.list_namespaced_lease(namespace).metadata.resource_version
    leases.create_namespaced_lease(namespace, lease("a", group="g1"))
    leases.create_namespaced_lease(namespace, lease("b", group="g2"))
    leases.patch_namespaced_lease("a", namespace, {"metadata": {"labels": {"group": "g2"}}})
    leases.patch_namespaced_lease("a", namespace, {"metadata": {"labels": {"group": "g1"}}})
    by_label = _events(leases, namespace, 3, resource_version=rv, label_selector="group=g1")
    assert [(kind, name) for kind, name, _ in by_label] == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "a")]
    by_name = _events(leases, namespace, 1, resource_version=rv, field_selector="metadata.name=b")
    assert [(kind, name) for kind, name, _ in by_name] == [("ADDED", "b")]


def test_namespaced_watch_sees_objects_created_without_namespace_in_the_body(
    api_client: kubernetes.client.ApiClient, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    rv = leases.list_namespaced_lease(namespace).metadata.resource_version
    body = lease("a")
    assert "namespace" not in body["metadata"]
    leases.create_namespaced_lease(namespace, body)
    assert _events(leases, namespace, 1, resource_version=rv) == [("ADDED", "a", "a")]
    everywhere = watch.Watch().stream(leases.list_lease_for_all_namespaces, resource_version=rv, timeout_seconds=5)
    assert next(everywhere)["object"].metadata.namespace == namespace


def test_watch_true_and_legacy_watch_path(
    api_emulator: ApiEmulator, api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    leases = kubernetes.client.CoordinationV1Api(api_client)
    rv = leases.list_namespaced_lease(namespace).metadata.resource_version
    leases.create_namespaced_lease(namespace, lease("a"))
    for path in (
        f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases?watch=true&resourceVersion={rv}",
        f"/apis/coordination.k8s.io/v1/watch/namespaces/{namespace}/leases?resourceVersion={rv}",
    ):
        response = api_client.rest_client.pool_manager.request(
            "GET",
            api_emulator.url + path,
            headers={"Authorization": f"Bearer {api_emulator.admin_token}"},
            preload_content=False,
        )
        assert first_event(response)["type"] == "ADDED", path


def test_break_watches_ends_every_stream(
    api_emulator: ApiEmulator, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    ended = threading.Event()

    def consume() -> None:
        for _ in watch.Watch().stream(leases.list_namespaced_lease, namespace, timeout_seconds=60, resource_version=rv):
            pass
        ended.set()

    rv = leases.list_namespaced_lease(namespace).metadata.resource_version
    thread = threading.Thread(target=consume)
    thread.start()
    eventually(lambda: any(r.watch and r.namespace == namespace for r in api_emulator.requests))
    api_emulator.break_watches()
    assert ended.wait(20)
    thread.join()


def test_dozens_of_concurrent_watches_each_see_every_event(
    leases: kubernetes.client.CoordinationV1Api, namespace: str, kubeconfig_path: Any
) -> None:
    rv = leases.list_namespaced_lease(namespace).metadata.resource_version
    results: dict[int, list[str]] = {}

    def consume(index: int) -> None:
        client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig_path))
        own = kubernetes.client.CoordinationV1Api(client)
        results[index] = [holder for _, _, holder in _events(own, namespace, 20, resource_version=rv)]
        client.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    leases.create_namespaced_lease(namespace, lease("a", holder="h0"))
    for n in range(1, 20):
        leases.patch_namespaced_lease("a", namespace, {"spec": {"holderIdentity": f"h{n}"}})
    for thread in threads:
        thread.join(60)
    assert len(results) == 30
    assert all(seen == [f"h{n}" for n in range(20)] for seen in results.values())
