"""The real-API-server fixture itself: where it finds the binaries, that it reaps what it
started when a start fails, and that the session server is what the tier claims (RBAC on,
anonymous off, a ServiceAccount token authenticates)."""

from __future__ import annotations

import pathlib
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kubecoord_testkit.servers.kubernetes import (
    ENV_APISERVER,
    Binaries,
    BinariesNotFound,
    RealApiServer,
    StartFailed,
    find_binaries,
)
from tests.fixtures.real_kubernetes import MintKubeconfig
from tests.helpers import eventually


def test_binaries_are_found_in_shared_k8s_beside_the_root_or_a_parent(tmp_path: pathlib.Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_APISERVER, raising=False)
    shared = tmp_path / "shared" / "k8s"
    shared.mkdir(parents=True)
    (shared / "kube-apiserver.xz").write_bytes(b"")
    (shared / "le-candidate.xz").write_bytes(b"")
    worktree = tmp_path / "wt" / "realk8s"  # a git worktree one level below the checkout
    worktree.mkdir(parents=True)
    found = find_binaries(worktree)
    assert found == Binaries(shared / "kube-apiserver.xz", shared / "le-candidate.xz")


def test_the_environment_variable_wins_and_absence_is_a_clear_error(tmp_path: pathlib.Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "kube-apiserver"
    binary.write_bytes(b"")
    monkeypatch.setenv(ENV_APISERVER, str(binary))
    assert find_binaries(tmp_path / "nowhere") == Binaries(binary, None)
    monkeypatch.delenv(ENV_APISERVER)
    with pytest.raises(BinariesNotFound, match=r"no kube-apiserver\[\.xz\] in \.\./shared/k8s"):
        find_binaries(tmp_path / "a" / "b")


def test_a_failed_start_stops_and_reaps_etcd(tmp_path: pathlib.Path) -> None:
    fake = tmp_path / "kube-apiserver"
    fake.write_text("#!/bin/sh\necho 'cannot start: a test stand-in' >&2\nexit 3\n")
    fake.chmod(0o755)
    server = RealApiServer(Binaries(fake, None), tmp_path / "work")
    started: list[int] = []
    original = server._start_etcd

    def spy(etcd: pathlib.Path) -> None:
        original(etcd)
        started.append(server._processes[-1].popen.pid)

    server._start_etcd = spy  # type: ignore[method-assign]
    with pytest.raises(StartFailed, match="cannot start: a test stand-in"), server:
        pass
    assert len(started) == 3  # retried on new ports, as for a port taken under us
    assert server._processes == []
    for pid in started:  # reaped: no zombie left behind
        assert not pathlib.Path(f"/proc/{pid}").exists()


def test_the_session_server_has_rbac_on_and_anonymous_off(real_api: RealApiServer,
                                                          real_admin_api: k8s.ApiClient,
                                                          real_namespace: str,
                                                          mint_kubeconfig: MintKubeconfig) -> None:
    context = ssl.create_default_context(cafile=str(real_api.pki / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(f"{real_api.url}/api/v1/namespaces", context=context, timeout=10)
    assert anonymous.value.code == 401
    config = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(mint_kubeconfig(real_namespace, "nobody")),
                                client_configuration=config)
    with k8s.ApiClient(config) as api, pytest.raises(ApiException) as denied:
        k8s.CoordinationV1Api(api).list_namespaced_lease(real_namespace)
    assert denied.value.status == 403
    assert "system:serviceaccount:" + real_namespace + ":nobody" in str(denied.value.body)


def test_restart_kills_and_starts_again_keeping_the_objects(tmp_path: pathlib.Path) -> None:
    try:
        binaries = find_binaries()
    except BinariesNotFound as exc:
        pytest.skip(f"the real kube-apiserver is not here: {exc}")
    with RealApiServer(binaries, tmp_path / "server") as server:
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(server.admin_kubeconfig)))
        core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}, "data": {"k": "v"}})
        first = server.url
        assert "kube-apiserver killed -9" in server.restart()
        assert "etcd killed -9" in server.restart(etcd=True)
        assert server.url != first  # new port; the kubeconfig follows it
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(server.admin_kubeconfig)))
        assert core.read_namespaced_config_map("kept", "default").data == {"k": "v"}


def test_the_session_server_is_a_whole_cluster(real_cluster: RealApiServer, real_admin_api: k8s.ApiClient) -> None:
    """What the tier relies on a cluster for: owned objects go with their owner, namespaces
    delete and get their ServiceAccount, a Deployment's pods are scheduled and run."""
    core, apps = k8s.CoreV1Api(real_admin_api), k8s.AppsV1Api(real_admin_api)
    namespace = f"whole-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    eventually(lambda: _exists(lambda: core.read_namespaced_service_account("default", namespace)), timeout=60)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "owned", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]}})
    core.delete_namespaced_config_map("owner", namespace)
    eventually(lambda: not _exists(lambda: core.read_namespaced_config_map("owned", namespace)), timeout=60)
    labels = {"app": "pause"}
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "pause"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}},
    })

    def running() -> bool:
        pods = core.list_namespaced_pod(namespace, label_selector="app=pause").items
        return len(pods) == 2 and all(pod.status.phase == "Running" and pod.spec.node_name for pod in pods)

    eventually(running, timeout=90, interval=0.5)
    eventually(lambda: (apps.read_namespaced_deployment("pause", namespace).status.available_replicas or 0) == 2,
               timeout=60)
    core.delete_namespace(namespace)
    eventually(lambda: not _exists(lambda: core.read_namespace(namespace)), timeout=120, interval=0.5)


def _exists(read: Callable[[], object]) -> bool:
    try:
        read()
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True
