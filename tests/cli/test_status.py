"""kubecoord status: the custom resources of a namespace with their state and health."""

from __future__ import annotations

import pathlib
from typing import Any

import kubernetes
import yaml

from kubecoord.cli import exits
from kubecoord_testkit.emulator import ApiEmulator

from .conftest import Cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
GROUP, VERSION = "kubecoord.dev", "v1alpha1"


def install_crds(client: kubernetes.client.ApiClient) -> None:
    api = kubernetes.client.ApiextensionsV1Api(client)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        try:
            api.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        except kubernetes.client.exceptions.ApiException as error:
            if error.status != 409:
                raise


def create(
    api: kubernetes.client.CustomObjectsApi,
    namespace: str,
    plural: str,
    kind: str,
    name: str,
    spec: dict[str, Any],
    status: dict[str, Any] | None,
) -> None:
    api.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        plural,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        },
    )
    if status is not None:
        # What the operator writes: through the status subresource.
        api.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, plural, name, {"status": status})


def ready(value: str, reason: str = "Reconciled", message: str = "") -> list[dict[str, str]]:
    return [
        {
            "type": "Ready",
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": "2026-11-23T10:00:00Z",
        }
    ]


def test_status_lists_every_resource_with_health(kubeconfig_path: pathlib.Path, namespace: str, k8s_cli: Cli) -> None:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig_path))  # type: ignore[no-untyped-call]  # kubernetes.config is unannotated
    install_crds(client)
    api = kubernetes.client.CustomObjectsApi(client)
    assert "no LeaderElection, Group or KVStore" in k8s_cli("status").stdout
    create(
        api,
        namespace,
        "leaderelections",
        "LeaderElection",
        "billing",
        {},
        {"leader": "pod-a", "epoch": 4, "observedGeneration": 1, "conditions": ready("True")},
    )
    create(
        api,
        namespace,
        "groups",
        "Group",
        "workers",
        {},
        {
            "memberCount": 2,
            "generation": 9,
            "members": [{"id": "w1"}, {"id": "w2"}],
            "observedGeneration": 1,
            "conditions": ready("False", "BackendUnavailable", "zookeeper unreachable"),
        },
    )
    create(
        api,
        namespace,
        "kvstores",
        "KVStore",
        "topics",
        {},
        {"keys": 12, "observedGeneration": 1, "conditions": ready("True")},
    )
    create(api, namespace, "kvstores", "KVStore", "fresh", {}, None)
    client.close()

    document = k8s_cli.json("status")
    by_name = {entry["name"]: entry for entry in document["resources"]}
    assert document["namespace"] == namespace
    assert [(e["kind"], e["name"]) for e in document["resources"]] == [
        ("LeaderElection", "billing"),
        ("Group", "workers"),
        ("KVStore", "fresh"),
        ("KVStore", "topics"),
    ]
    assert (by_name["billing"]["leader"], by_name["billing"]["epoch"], by_name["billing"]["health"]) == (
        "pod-a",
        4,
        "Ready",
    )
    assert by_name["workers"]["members"] == 2 and by_name["workers"]["generation"] == 9
    assert by_name["workers"]["health"] == "NotReady: BackendUnavailable (zookeeper unreachable)"
    assert not by_name["workers"]["healthy"]
    assert by_name["topics"]["keys"] == 12 and by_name["topics"]["healthy"]
    assert by_name["fresh"]["health"] == "Unknown"

    lines = k8s_cli("status").stdout.splitlines()
    assert lines[0].split() == ["KIND", "NAME", "BACKEND", "LEADER", "EPOCH", "MEMBERS", "KEYS", "HEALTH", "AGE"]
    assert lines[1].split()[:8] == ["LeaderElection", "billing", "kubernetes", "pod-a", "4", "-", "-", "Ready"]
    assert lines[2].split()[:7] == ["Group", "workers", "kubernetes", "-", "-", "2", "-"]
    assert "NotReady: BackendUnavailable" in lines[2]
    everywhere = k8s_cli("status", "-A").stdout.splitlines()
    assert everywhere[0].split()[0] == "NAMESPACE"
    assert any(line.split()[:3] == [namespace, "LeaderElection", "billing"] for line in everywhere)


def test_status_without_the_crds_exits_4(plain_cli: Cli, tmp_path: pathlib.Path) -> None:
    with ApiEmulator() as bare:
        kubeconfig = bare.write_kubeconfig(tmp_path / "kubeconfig")
        result = plain_cli("status", "--kubeconfig", str(kubeconfig))
    assert result.returncode == exits.NOT_FOUND
    assert "CRDs installed" in result.stderr


def test_status_needs_a_kubernetes_url(zk_cli: Cli) -> None:
    result = zk_cli("status")
    assert result.returncode == exits.USAGE and "live in Kubernetes" in result.stderr
