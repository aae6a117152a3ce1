"""A PUT of a missing object: the real server creates a Lease (its strategy allows create
on update, whatever resourceVersion the body carries) and answers 404 for a ConfigMap. The
emulator answered 404 for both, so no emulator test could see a holder's renewal put a
deleted Lease back without its ownerReference (tests/operator/test_controller_real.py)."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .clusters import Cluster


def test_a_put_creates_a_missing_lease_whatever_its_resource_version(cluster: Cluster) -> None:
    name = f"put-{uuid.uuid4().hex[:8]}"
    leases = k8s.CoordinationV1Api(cluster.admin_api)
    body = {"metadata": {"name": name, "resourceVersion": "12345"}, "spec": {"holderIdentity": "pod-a"}}
    created, code, _ = leases.replace_namespaced_lease_with_http_info(name, cluster.namespace, body)
    assert code == 201
    assert created.spec.holder_identity == "pod-a"
    assert created.metadata.resource_version != "12345"
    assert created.metadata.uid


def test_a_put_of_a_missing_configmap_is_not_found(cluster: Cluster) -> None:
    name = f"put-{uuid.uuid4().hex[:8]}"
    core = k8s.CoreV1Api(cluster.admin_api)
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map(name, cluster.namespace, {"metadata": {"name": name}, "data": {}})
    assert caught.value.status == 404
