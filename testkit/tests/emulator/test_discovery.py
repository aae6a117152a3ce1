"""Discovery, version and health endpoints, as the kubernetes client's DynamicClient and
kubectl read them."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from kubecoord_testkit.emulator import ApiEmulator

from .helpers import request

BUILTINS = {
    ("", "v1"): {"namespaces", "configmaps", "secrets", "serviceaccounts", "services", "events", "pods"},
    ("coordination.k8s.io", "v1"): {"leases"},
    ("apps", "v1"): {"deployments"},
    ("rbac.authorization.k8s.io", "v1"): {"roles", "rolebindings", "clusterroles", "clusterrolebindings"},
    ("events.k8s.io", "v1"): {"events"},
    ("apiextensions.k8s.io", "v1"): {"customresourcedefinitions"},
}


def test_core_and_group_discovery_list_the_builtins(api_emulator: ApiEmulator) -> None:
    code, versions = request(api_emulator, "GET", "/api")
    assert code == 200 and versions["kind"] == "APIVersions" and versions["versions"] == ["v1"]
    code, groups = request(api_emulator, "GET", "/apis")
    assert groups["kind"] == "APIGroupList"
    names = {group["name"] for group in groups["groups"]}
    assert {group for group, _ in BUILTINS if group} <= names
    for (group, version), expected in BUILTINS.items():
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        code, listing = request(api_emulator, "GET", path)
        assert code == 200 and listing["kind"] == "APIResourceList"
        assert listing["groupVersion"] == (f"{group}/{version}" if group else version)
        assert expected <= {r["name"] for r in listing["resources"]}, path
    _, core = request(api_emulator, "GET", "/api/v1")
    namespaces = next(r for r in core["resources"] if r["name"] == "namespaces")
    assert namespaces["namespaced"] is False and namespaces["kind"] == "Namespace"
    leases = request(api_emulator, "GET", "/apis/coordination.k8s.io")[1]
    assert leases["kind"] == "APIGroup" and leases["preferredVersion"]["version"] == "v1"


def test_version_and_health_need_no_token(api_emulator: ApiEmulator) -> None:
    code, version = request(api_emulator, "GET", "/version", token="")
    assert code == 200 and version["major"] == "1" and version["minor"] == "32"
    for path in ("/healthz", "/readyz", "/livez"):
        assert request(api_emulator, "GET", path, token="") == (200, "ok")


def test_dynamic_client_finds_resources_through_discovery(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    dynamic = DynamicClient(api_client)
    leases = dynamic.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
    leases.create(namespace=namespace, body={"metadata": {"name": "d"}, "spec": {"holderIdentity": "x"}})
    assert leases.get(namespace=namespace, name="d").spec.holderIdentity == "x"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_reads_through_discovery(tmp_path: pathlib.Path) -> None:
    """kubectl sends no bearer token over plain HTTP: it talks to an emulator with anonymous_admin.
    There is no OpenAPI document (--validate=false) and no protobuf (--server-side apply sends YAML)."""
    with ApiEmulator(anonymous_admin=True) as api:
        config = api.write_kubeconfig(tmp_path / "kubeconfig")
        kubectl = ["kubectl", "--kubeconfig", str(config)]
        resources = subprocess.run([*kubectl, "api-resources"], capture_output=True, text=True, timeout=60, check=True)
        assert "leases" in resources.stdout and "coordination.k8s.io/v1" in resources.stdout
        applied = subprocess.run(
            [*kubectl, "apply", "--server-side", "--validate=false", "-f", "-"],
            input="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-kubectl\ndata:\n  a: b\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert applied.returncode == 0, applied.stderr
        listed = subprocess.run(
            [*kubectl, "get", "configmaps", "-o", "name"], capture_output=True, text=True, timeout=60, check=True
        )
        assert listed.stdout.split() == ["configmap/from-kubectl"]
        assert [obj["data"] for obj in api.objects("configmaps", "default")] == [{"a": "b"}]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_get_prints_a_crds_printer_columns(tmp_path: pathlib.Path) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    "additionalPrinterColumns": [{"name": "Leader", "type": "string", "jsonPath": ".status.leader"}],
                }
            ],
        },
    }
    with ApiEmulator(anonymous_admin=True) as api:
        request(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        request(
            api,
            "POST",
            "/apis/example.com/v1/namespaces/default/things",
            {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t1"}},
        )
        request(
            api,
            "PATCH",
            "/apis/example.com/v1/namespaces/default/things/t1/status",
            {"status": {"leader": "pod-a"}},
            "application/merge-patch+json",
        )
        config = api.write_kubeconfig(tmp_path / "kubeconfig")
        shown = subprocess.run(
            ["kubectl", "--kubeconfig", str(config), "get", "things"], capture_output=True, text=True, timeout=60
        )
    assert shown.returncode == 0, shown.stderr
    header, row = shown.stdout.splitlines()
    assert header.split() == ["NAME", "LEADER", "AGE"]
    assert row.split()[:2] == ["t1", "pod-a"]
