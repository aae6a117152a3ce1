"""stop() then start() restarts the emulator on the same port with its objects kept, as a
kube-apiserver restart keeps what etcd holds; watches and connections are cut."""

from __future__ import annotations

import pathlib
import threading

import kubernetes
from kubernetes import watch

from kubecoord_testkit.emulator import ApiEmulator


def test_restart_keeps_objects_and_serves_new_watches(tmp_path: pathlib.Path) -> None:
    api = ApiEmulator().start()
    try:
        port = api.port
        client = kubernetes.config.new_client_from_config(config_file=str(api.write_kubeconfig(tmp_path / "k")))
        core = kubernetes.client.CoreV1Api(client)
        created = core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}, "data": {"a": "1"}})
        events: list[str] = []

        def follow() -> None:
            try:
                for event in watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=30):
                    events.append(event["type"])
            except Exception as exc:  # the restart cuts the stream
                events.append(type(exc).__name__)

        watcher = threading.Thread(target=follow, daemon=True)
        watcher.start()
        api.stop()
        watcher.join(30)
        assert not watcher.is_alive(), "the watch outlived the server"
        api.start()
        assert api.port == port
        kept = core.read_namespaced_config_map("kept", "default")
        assert kept.data == {"a": "1"}
        assert int(kept.metadata.resource_version) == int(created.metadata.resource_version)
        replaced = core.patch_namespaced_config_map("kept", "default", {"data": {"a": "2"}})
        assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
        stream = watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=5)
        assert next(stream)["object"].data == {"a": "2"}
        client.close()
    finally:
        api.stop()
