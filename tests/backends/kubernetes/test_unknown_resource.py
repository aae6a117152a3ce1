"""A request for a resource type the server does not serve: kube-apiserver authorizes
before it resolves the type, so a user without rights gets 403 and only an authorized one
404 (kubecoord's binding relies on it: it asks discovery first). Same on the emulator."""

from __future__ import annotations

import json
import pathlib

import kubernetes
import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .clusters import Cluster


def _status(api: k8s.ApiClient, namespace: str, group: str = "nothing.example.com") -> tuple[int, str]:
    with pytest.raises(ApiException) as caught:
        k8s.CustomObjectsApi(api).get_namespaced_custom_object(group, "v1", namespace, "widgets", "w1")
    body = str(caught.value.body)
    # The real server answers a group it does not serve with a plain-text "404 page not
    # found" (no Status); the emulator with a Status (README, documented differences).
    return caught.value.status, json.loads(body)["reason"] if body.startswith("{") else body.strip()


def test_an_unknown_resource_type_is_forbidden_without_rights_and_not_found_with_them(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    assert _status(cluster.admin_api, cluster.namespace)[0] == 404
    assert _status(cluster.admin_api, cluster.namespace, "coordination.k8s.io") == (404, "NotFound")
    unlisted = kubernetes.config.new_client_from_config(
        config_file=str(cluster.service_account_kubeconfig("nobody", tmp_path)))
    assert _status(unlisted, cluster.namespace) == (403, "Forbidden")
    assert _status(unlisted, cluster.namespace, "coordination.k8s.io") == (403, "Forbidden")
