"""``kubectl get`` on the kubecoord CRDs: the emulator's Table cells are the real
kube-apiserver's. The same LeaderElections, Groups and KVStores (with the operator's kind
of status, Ready condition included) go to both servers; the printer columns' cells must
agree — READY reads ``.status.conditions[?(@.type=="Ready")].status``."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes import client as k8s
from tests.fixtures.real_kubernetes import install_crds

from kubecoord_testkit.emulator import ApiEmulator

ROOT = pathlib.Path(__file__).resolve().parents[3]
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
CONDITIONS = [{"type": "Progressing", "status": "False", "reason": "Done", "message": "",
               "lastTransitionTime": "2026-01-01T00:00:00Z"},
              {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}]
RESOURCES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("leaderelections", "billing", {}, {"leader": "pod-a", "epoch": 3, "conditions": CONDITIONS}),
    ("leaderelections", "fresh", {}, {}),
    ("leaderelections", "failing", {}, {"conditions": [{**CONDITIONS[1], "status": "False", "reason": "Denied"}]}),
    ("groups", "workers", {}, {"memberCount": 2, "generation": 4, "conditions": CONDITIONS}),
    ("kvstores", "topics", {}, {"keys": 5, "size": "120 B", "conditions": CONDITIONS}),
]


def _arrange(api: k8s.ApiClient, namespace: str) -> None:
    custom = k8s.CustomObjectsApi(api)
    kinds = {"leaderelections": "LeaderElection", "groups": "Group", "kvstores": "KVStore"}
    for plural, name, spec, status in RESOURCES:
        custom.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", namespace, plural, {
            "apiVersion": "kubecoord.dev/v1alpha1", "kind": kinds[plural], "metadata": {"name": name}, "spec": spec})
        if status:
            custom.patch_namespaced_custom_object_status("kubecoord.dev", "v1alpha1", namespace, plural, name,
                                                         {"status": status})


def _cells(api: k8s.ApiClient, namespace: str) -> dict[str, list[Any]]:
    """plural/name -> (column name, cell) of every column but Age."""
    found: dict[str, list[Any]] = {}
    for plural in ("leaderelections", "groups", "kvstores"):
        serialized = api.param_serialize(method="GET", resource_path=f"/apis/kubecoord.dev/v1alpha1/namespaces/"
                                         f"{namespace}/{plural}", header_params={"Accept": TABLE},
                                         auth_settings=["BearerToken"])
        response = api.call_api(*serialized)
        response.read()
        table = json.loads(response.data)
        names = [column["name"] for column in table["columnDefinitions"]]
        for row in table["rows"]:
            found[f"{plural}/{row['cells'][0]}"] = [(n, c) for n, c in zip(names, row["cells"], strict=True)
                                                    if n != "Age"]
    return found


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[k8s.ApiClient]:
    with ApiEmulator(host="127.0.0.1", port=0) as emulator:
        path = emulator.write_kubeconfig(tmp_path_factory.mktemp("tables") / "kubeconfig")
        api = kubernetes.config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]
        extensions = k8s.ApiextensionsV1Api(api)
        for crd in sorted((ROOT / "crds").glob("*.yaml")):
            extensions.create_custom_resource_definition(yaml.safe_load(crd.read_text()))
        yield api
        api.close()


def test_the_printer_columns_read_as_the_api_server_reads_them(
    emulated: k8s.ApiClient, real_admin_api: k8s.ApiClient, real_namespace: str
) -> None:
    install_crds(real_admin_api)
    k8s.CoreV1Api(emulated).create_namespace({"metadata": {"name": real_namespace}})  # type: ignore[arg-type]
    _arrange(real_admin_api, real_namespace)
    _arrange(emulated, real_namespace)
    real, ours = _cells(real_admin_api, real_namespace), _cells(emulated, real_namespace)
    assert ours == real
    assert ("Ready", "True") in real["leaderelections/billing"]  # the filter's cell, not <none>
    assert ("Ready", "False") in real["leaderelections/failing"]
