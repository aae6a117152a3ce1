"""The emulator's own controls: lifecycle, kubeconfig, hang, the command line."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading

import kubernetes
import pytest
import urllib3
from tests.helpers import eventually

from kubecoord_testkit.emulator import ApiEmulator

from .helpers import lease, request


def test_start_stop_and_a_context_manager_free_the_port() -> None:
    api = ApiEmulator(port=0)
    api.start()
    port = api.port
    assert api.url == f"http://127.0.0.1:{port}"
    assert request(api, "GET", "/healthz")[0] == 200
    api.stop()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    with ApiEmulator() as again:
        assert request(again, "GET", "/version")[0] == 200


def test_stop_closes_open_watches_and_joins_its_thread(tmp_path: pathlib.Path) -> None:
    api = ApiEmulator().start()
    client = kubernetes.config.new_client_from_config(config_file=str(api.write_kubeconfig(tmp_path / "k")))
    leases = kubernetes.client.CoordinationV1Api(client)
    ended = threading.Event()

    def consume() -> None:
        try:
            for _ in kubernetes.watch.Watch().stream(leases.list_namespaced_lease, "default", timeout_seconds=120):
                pass
        except Exception:  # the stream may end either cleanly or with a connection error
            pass
        ended.set()

    thread = threading.Thread(target=consume)
    thread.start()
    eventually(lambda: api.open_watches == 1)
    api.stop()
    assert ended.wait(30)
    thread.join()
    client.close()


def test_kubeconfig_with_a_namespace_and_a_service_account_token(
    api_emulator: ApiEmulator, tmp_path: pathlib.Path
) -> None:
    token = api_emulator.token_for_service_account("default", "app")
    assert token == api_emulator.token_for_service_account("default", "app") != api_emulator.admin_token
    path = api_emulator.write_kubeconfig(tmp_path / "deep" / "kubeconfig", namespace="kube-system", token=token)
    _, active = kubernetes.config.list_kube_config_contexts(config_file=str(path))
    assert active["context"]["namespace"] == "kube-system"
    client = kubernetes.config.new_client_from_config(config_file=str(path))
    with pytest.raises(kubernetes.client.ApiException) as caught:
        kubernetes.client.CoreV1Api(client).list_namespace()
    assert caught.value.status == 403
    client.close()


def test_hang_holds_requests_so_that_client_timeouts_fire(
    api_emulator: ApiEmulator, leases: kubernetes.client.CoordinationV1Api, namespace: str
) -> None:
    api_emulator.hang(True)
    try:
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            leases.create_namespaced_lease(namespace, lease("held"), _request_timeout=0.5)
    finally:
        api_emulator.hang(False)
    assert leases.list_namespaced_lease(namespace).items == []  # a held request is never processed
    assert leases.create_namespaced_lease(namespace, lease("after"))
    eventually(lambda: any(r.status == 0 and r.verb == "create" for r in api_emulator.requests))


def test_kubecoord_emulator_command_prints_the_url_and_stops_on_sigterm(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubecoord_testkit",
            "emulator",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
            "--require-token",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert process.stdout.readline().strip() == f"kubeconfig: {kubeconfig}"
        client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        names = {ns.metadata.name for ns in kubernetes.client.CoreV1Api(client).list_namespace().items}
        assert "default" in names
        client.close()
        assert urllib3.request("GET", url + "/api/v1/namespaces").status == 401
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def test_fail_answers_the_next_matching_requests_and_writes_nothing(tmp_path: pathlib.Path) -> None:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes.client.exceptions import ApiException

    with ApiEmulator() as api:
        path = api.write_kubeconfig(tmp_path / "kubeconfig")
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(path)))
        api.fail("create", "configmaps", code=429, times=2)
        for _ in range(2):
            with pytest.raises(ApiException) as caught:
                core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
            assert caught.value.status == 429 and '"reason": "TooManyRequests"' in str(caught.value.body)
        assert api.objects("configmaps", "default") == []  # refused requests are not processed
        assert api.pending_faults() == 0
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})  # spent: served again
        api.fail("patch", "configmaps", code=503)
        core.read_namespaced_config_map("c", "default")  # another verb: not affected
        api.clear_faults()
        core.patch_namespaced_config_map("c", "default", {"data": {"k": "v"}})


def test_a_cut_fault_processes_the_request_and_breaks_its_answer_half_way(tmp_path: pathlib.Path) -> None:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    with ApiEmulator() as api:
        path = api.write_kubeconfig(tmp_path / "kubeconfig")
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(path)))
        api.fail("create", "configmaps", cut=True)
        with pytest.raises(urllib3.exceptions.ProtocolError):  # the body is shorter than its Content-Length
            core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
        assert [o["metadata"]["name"] for o in api.objects("configmaps", "default")] == ["c"]  # processed
        assert api.pending_faults() == 0
        assert core.read_namespaced_config_map("c", "default").metadata.name == "c"  # spent: served whole
