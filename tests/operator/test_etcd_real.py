"""``backend: etcd`` on the real kube-apiserver: its CEL rules and schema refuse what the
emulator refuses (testkit/tests/emulator/test_admission_crds.py, the same cases), and
``kubecoord operator``, a process of its own, mirrors etcd-backed resources from a real
etcd that requires authentication, with the credentials of the Secret the spec names, and
purges their keys when they are deleted."""

from __future__ import annotations

import base64
import json
import pathlib
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import kubecoord
from kubecoord_testkit.servers.etcd import EtcdCluster
from tests.fixtures.etcd import ETCD_ROOT_PASSWORD
from tests.fixtures.real_kubernetes import install_crds, running_operator
from tests.helpers import eventually
from tests.operator.conftest import INVALID_ETCD

API = ("kubecoord.dev", "v1alpha1")
KINDS = {"LeaderElection": "leaderelections", "Group": "groups", "KVStore": "kvstores"}


@pytest.fixture(scope="module")
def custom(real_admin_api: k8s.ApiClient, real_namespace: str) -> k8s.CustomObjectsApi:
    install_crds(real_admin_api)
    return k8s.CustomObjectsApi(real_admin_api)


@pytest.fixture(scope="module")
def operator_process(
    custom: k8s.CustomObjectsApi, real_kubeconfig: pathlib.Path, real_namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[subprocess.Popen[bytes]]:
    """``kubecoord operator`` for this module's namespace, as a process (admin rights)."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with running_operator(real_kubeconfig, real_namespace, "etcd-operator", log) as process:
        yield process


def _body(kind: str, spec: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    name = name or f"e-{uuid.uuid4().hex[:8]}"
    return {"apiVersion": "kubecoord.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def _create(custom: k8s.CustomObjectsApi, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = custom.create_namespaced_custom_object(*API, namespace, KINDS[body["kind"]], body)
    return created


def _get(custom: k8s.CustomObjectsApi, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = custom.get_namespaced_custom_object(*API, namespace, KINDS[kind], name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def _ready(custom: k8s.CustomObjectsApi, namespace: str, kind: str, name: str) -> str:
    status = (_get(custom, namespace, kind, name) or {}).get("status") or {}
    return next((f"{c['status']}: {c['message']}" for c in status.get("conditions") or [] if c["type"] == "Ready"),
                "")


def test_etcd_settings_are_defaulted_on_every_kind(custom: k8s.CustomObjectsApi, real_namespace: str) -> None:
    for kind in KINDS:
        created = _create(custom, real_namespace, _body(kind, {"backend": "etcd", "etcd": {"hosts": ["etcd-0.etcd"]}}))
        assert created["spec"]["etcd"] == {
            "hosts": ["etcd-0.etcd"], "prefix": "kubecoord", "sessionTimeoutSeconds": 10, "tls": False,
        }, kind


@pytest.mark.parametrize(("etcd", "field", "message"), INVALID_ETCD)
def test_bad_etcd_settings_are_refused_with_the_field_named(
    custom: k8s.CustomObjectsApi, real_namespace: str, etcd: dict[str, Any], field: str, message: str
) -> None:
    for kind in KINDS:
        with pytest.raises(ApiException) as refused:
            _create(custom, real_namespace, _body(kind, {"backend": "etcd", "etcd": etcd}))
        assert refused.value.status == 422, kind
        status = json.loads(refused.value.body)
        # (a type error also leaves rules unchecked: a cause whose field is "<nil>")
        assert [c["field"] for c in status["details"]["causes"] if c.get("field", "<nil>") != "<nil>"] == [field], kind
        assert message in status["message"], status["message"]


def test_etcd_needs_its_settings_and_only_with_it(custom: k8s.CustomObjectsApi, real_namespace: str) -> None:
    for spec in ({"backend": "etcd"}, {"backend": "kubernetes", "etcd": {"hosts": ["etcd"]}}):
        with pytest.raises(ApiException) as refused:
            _create(custom, real_namespace, _body("LeaderElection", spec))
        assert refused.value.status == 422
        assert "spec.etcd is required when spec.backend is etcd and forbidden otherwise" in str(refused.value.body)


def test_the_operator_mirrors_etcd_resources_with_the_secret_s_credentials(
    custom: k8s.CustomObjectsApi, real_admin_api: k8s.ApiClient, real_namespace: str,
    operator_process: subprocess.Popen[bytes], etcd_with_auth: EtcdCluster,
) -> None:
    core = k8s.CoreV1Api(real_admin_api)
    unique = uuid.uuid4().hex[:8]
    name, prefix = f"billing-{unique}", f"real-{unique}"
    for secret, password in ((f"etcd-{unique}", ETCD_ROOT_PASSWORD), (f"wrong-{unique}", "not-it")):
        data = {"username": base64.b64encode(b"root").decode(),
                "password": base64.b64encode(password.encode()).decode()}
        core.create_namespaced_secret(real_namespace, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name=secret), data=data))

    def spec(secret: str) -> dict[str, Any]:
        return {"backend": "etcd", "etcd": {"hosts": etcd_with_auth.hosts.split(","), "prefix": prefix,
                                            "sessionTimeoutSeconds": 3, "secretName": secret}}

    _create(custom, real_namespace, _body("LeaderElection", spec(f"etcd-{unique}"), name))
    _create(custom, real_namespace, _body("KVStore", spec(f"etcd-{unique}"), name))
    _create(custom, real_namespace, _body("KVStore", spec(f"wrong-{unique}"), f"{name}-w"))
    eventually(lambda: _ready(custom, real_namespace, "LeaderElection", name).startswith("True"), timeout=60)
    eventually(lambda: _ready(custom, real_namespace, "KVStore", f"{name}-w").startswith(
        "False: PermissionDeniedError: etcd refused user 'root'"), timeout=60)

    url = f"etcd://{etcd_with_auth.hosts}/{prefix}"
    with kubecoord.connect(url, username="root", password=ETCD_ROOT_PASSWORD, lease_duration=3) as coordinator:
        coordinator.storage(name).put("topics/orders", "partitions=3")
        election = coordinator.leader_election(name)
        election.nominate("pod-r", data="host=r")
        leader = election.get_leader()

        def mirrored() -> bool:
            le = (_get(custom, real_namespace, "LeaderElection", name) or {}).get("status") or {}
            kv = (_get(custom, real_namespace, "KVStore", name) or {}).get("status") or {}
            return le.get("leader") == "pod-r" and le.get("epoch") == leader.epoch and kv.get("keys") == 1

        eventually(mirrored, timeout=60)
        election.close()
        for kind in ("LeaderElection", "KVStore"):
            custom.delete_namespaced_custom_object(*API, real_namespace, KINDS[kind], name)
        eventually(lambda: all(_get(custom, real_namespace, k, name) is None for k in ("LeaderElection", "KVStore")),
                   timeout=60)
        purge = coordinator.purge  # type: ignore[attr-defined]
        assert purge("leader_election", name) == 0 and purge("kv", name) == 0  # the finalizer left nothing
    custom.delete_namespaced_custom_object(*API, real_namespace, "kvstores", f"{name}-w")
