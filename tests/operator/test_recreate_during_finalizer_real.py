"""A ZooKeeper- or Cassandra-backed KVStore re-created under its name while its finalizer
still runs, on the whole cluster: ``kubecoord operator`` as a process, the backend behind
a fault proxy that stalls the operator's connection (hold, both ways) from the deletion on
— the purge's requests wait in the proxy until the backend client gives them up, and
after CLEANUP_RETRIES tries that ended so the finalizer lets the old resource go — while a user
keeps re-creating the resource (409 until the old one is gone). The new resource's client
writes its key directly to the backend while the old purge's requests are still held;
then the proxy delivers them. What must hold: the new resource comes up Ready, its key
survives the old purge's late requests, and its status counts the keys the backend has.
What the old resource's keys do is printed: a purge that gave up may leave them
(docs/operator.md says so), a late one may still remove them.

A purge try that has not ended is never abandoned (its thread would go on once the
connection heals and empty the store the new resource serves): the finalizer stays until
it ends, by the backend client's own timeouts, and only tries that ended count.
"""

from __future__ import annotations

import pathlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import kubecoord
from kubecoord.operator.controller.finalizer import CLEANUP_RETRIES, CLEANUP_SECONDS
from kubecoord_testkit.faults.proxy import ThreadedFaultProxy
from kubecoord_testkit.servers.cassandra import CassandraServer
from kubecoord_testkit.servers.kubernetes import RealApiServer
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.fixtures.real_kubernetes import create_namespace, install_crds
from tests.helpers import eventually
from tests.operator.test_controller_real import GROUP, VERSION, Api, Operator

pytestmark = pytest.mark.slow

FINALIZER = "kubecoord.dev/cleanup"


@pytest.fixture(scope="module")
def namespace(real_admin_api: k8s.ApiClient, real_cluster: RealApiServer) -> str:
    install_crds(real_admin_api)
    return create_namespace(real_admin_api, "refinal")


@pytest.fixture(scope="module")
def operator(real_kubeconfig: pathlib.Path, namespace: str, tmp_path_factory: pytest.TempPathFactory,
             ) -> Iterator[Operator]:
    yield from Operator(real_kubeconfig, namespace, tmp_path_factory.mktemp("operator"), "refinal-operator").serving()


def _backend(request: pytest.FixtureRequest, which: str) -> tuple[str, str, dict[str, Any]]:
    """(upstream host:port, the client's URL, the spec without hosts) for ``which``."""
    suffix = uuid.uuid4().hex[:6]
    if which == "zookeeper":
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        upstream = server.hosts.split(",")[0]
        return upstream, f"zookeeper://{server.hosts}/refinal-{suffix}", {
            "backend": "zookeeper", "zookeeper": {"chroot": f"/refinal-{suffix}", "sessionTimeoutSeconds": 4}}
    url: str = request.getfixturevalue("cassandra_keyspace")
    cassandra: CassandraServer = request.getfixturevalue("cassandra_server")
    upstream = cassandra.hosts.split(",")[0]
    return upstream, url, {"backend": "cassandra", "cassandra": {"keyspace": url.rsplit("/", 1)[1]}}


def _keys(store: Any) -> list[str]:
    return sorted(store.children(""))


@pytest.mark.timeout(420)
@pytest.mark.parametrize("which", ["zookeeper", "cassandra"])
def test_a_kvstore_recreated_while_its_finalizer_runs_keeps_the_new_incarnations_data(
    operator: Operator, namespace: str, real_admin_api: k8s.ApiClient, request: pytest.FixtureRequest, which: str,
) -> None:
    api = Api(real_admin_api, namespace)
    upstream, url, spec = _backend(request, which)
    host, port = upstream.rsplit(":", 1)
    name = f"refinal-{which[:2]}-{uuid.uuid4().hex[:6]}"
    with ThreadedFaultProxy((host, int(port))) as proxy, kubecoord.connect(url) as direct:
        spec[which]["hosts"] = [proxy.address]
        api.create("KVStore", name, spec)
        eventually(lambda: api.ready("KVStore", name), timeout=120, interval=0.5)
        assert FINALIZER in (api.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "kvstores", name)["metadata"].get("finalizers") or [])
        store = direct.storage(name)
        store.put("old", "of the first incarnation")
        eventually(lambda: api.status("KVStore", name).get("keys") == 1, timeout=60, interval=0.3)

        proxy.hold("both")  # the operator's backend connection stalls: the purge cannot finish
        api.delete("KVStore", name)
        conflicts: list[float] = []
        created: list[float] = []

        def recreate() -> None:
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "KVStore", "metadata": {"name": name}, "spec": spec}
            deadline = time.monotonic() + CLEANUP_RETRIES * (CLEANUP_SECONDS + 20) + 60
            while time.monotonic() < deadline:
                try:
                    api.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "kvstores", body)
                except ApiException as error:
                    if error.status != 409:
                        raise
                    conflicts.append(time.monotonic())
                    time.sleep(0.3)
                    continue
                created.append(time.monotonic())
                return

        maker = threading.Thread(target=recreate, daemon=True)
        maker.start()
        maker.join(CLEANUP_RETRIES * (CLEANUP_SECONDS + 20) + 90)
        assert created, "the name was never free again: the finalizer blocked the deletion"
        assert conflicts, "no re-create was attempted while the old resource's finalizer ran"
        store.put("new", "of the second incarnation")  # while the old purge's requests are still held
        old_after_recreate = _keys(store)
        proxy.release("both")
        proxy.heal()
        eventually(lambda: api.ready("KVStore", name), timeout=120, interval=0.5)
        time.sleep(CLEANUP_SECONDS + 5)  # past any late try of the old purge
        keys = _keys(store)
        print(f"{which}: {len(conflicts)} re-creates refused (409) over {created[0] - conflicts[0]:.1f} s; "
              f"keys after the re-create {old_after_recreate}, at the end {keys}; "
              f"old purge gave up: {'cleanup gave up' in operator.text()}")
        assert store.fetch("new").result(10) is not None, "the old incarnation's purge deleted the new one's key"
        eventually(lambda: api.status("KVStore", name).get("keys") == len(_keys(store)), timeout=60, interval=0.5)
        assert api.ready("KVStore", name)
        api.delete("KVStore", name)
        eventually(lambda: api.status("KVStore", name) == {}, timeout=90, interval=0.5)
        eventually(lambda: store.fetch("new").result(10) is None, timeout=60, interval=0.5)  # its own purge ran
