"""Clients in other processes: concurrent optimistic writers lose no update, and a
watcher killed with SIGKILL leaves no watch behind."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import kubernetes
import pytest
from tests.helpers import eventually

from kubecoord_testkit.emulator import ApiEmulator

WRITER = textwrap.dedent("""
    import sys, kubernetes
    from kubernetes.client import ApiException
    client = kubernetes.config.new_client_from_config(config_file=sys.argv[1])
    core = kubernetes.client.CoreV1Api(client)
    namespace, me, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
    conflicts = 0
    for n in range(count):
        while True:
            cm = core.read_namespaced_config_map("counter", namespace)
            cm.data["value"] = str(int(cm.data["value"]) + 1)
            cm.data[me] = str(n + 1)
            try:
                core.replace_namespaced_config_map("counter", namespace, cm)
                break
            except ApiException as error:
                assert error.status == 409, error
                conflicts += 1
    print(conflicts)
""")

WATCHER = textwrap.dedent("""
    import sys, kubernetes
    client = kubernetes.config.new_client_from_config(config_file=sys.argv[1])
    core = kubernetes.client.CoreV1Api(client)
    print("watching", flush=True)
    for _ in kubernetes.watch.Watch().stream(core.list_namespaced_config_map, sys.argv[2]):
        pass
""")


@pytest.mark.slow
def test_concurrent_writers_in_four_processes_lose_no_update(
    kubeconfig_path: pathlib.Path, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "counter"}, "data": {"value": "0"}})
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(kubeconfig_path), namespace, f"w{i}", "25"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    outputs = [writer.communicate(timeout=120)[0] for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0, 0, 0]
    data = core.read_namespaced_config_map("counter", namespace).data
    assert data == {"value": "100", "w0": "25", "w1": "25", "w2": "25", "w3": "25"}
    print("conflicts per writer:", [int(out) for out in outputs])


@pytest.mark.slow
def test_a_watcher_killed_with_sigkill_leaves_no_open_watch(tmp_path: pathlib.Path) -> None:
    with ApiEmulator() as api:  # its own emulator: nothing else opens watches on it
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        watcher = subprocess.Popen(
            [sys.executable, "-c", WATCHER, str(kubeconfig), "default"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert watcher.stdout is not None and watcher.stdout.readline().strip() == "watching"
            eventually(lambda: api.open_watches == 1, timeout=30)
        finally:
            os.kill(watcher.pid, signal.SIGKILL)
            watcher.wait(timeout=30)
        eventually(lambda: api.open_watches == 0, timeout=30)
