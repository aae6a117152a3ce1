"""The testkit's pytest plugin (entry point ``pytest11``): fixtures that start real servers
on 127.0.0.1 and stop and reap them at the end, even when tests fail.

Installing kubecoord-testkit makes these fixtures visible to every test; nothing here is
imported until a fixture is used (no JVM, no aiohttp, no etcd at collection time).

The Kubernetes API emulator (``kubecoord_testkit.emulator``):

- ``api_emulator``: a started ApiEmulator for the whole session (stopped and its thread
  joined at the end, even when tests fail).
- ``kubeconfig_path``: an admin kubeconfig for it in a temporary directory. Pass the path
  explicitly (``kubernetes.config.new_client_from_config(config_file=...)``); the
  KUBECONFIG environment variable is neither read nor set.

ZooKeeper (Debian's jars; ``kubecoord_testkit.servers.zookeeper``):

- ``zookeeper_server``: one standalone server for the whole session (tests isolate
  themselves by chroot: ``zookeeper_url``).
- ``private_zookeeper``: a standalone server of the test's own (for tests that stop or
  freeze it); ``zookeeper_ensemble``: three servers forming one ensemble on loopback.
- ``zookeeper_url``: ``zookeeper://HOSTS/test-<hex>``, a chroot no other test uses.

The real kube-apiserver (``kubecoord_testkit.servers.kubernetes``):

- ``real_api``: one RealApiServer per session: the whole cluster (etcd, kube-apiserver,
  the controller manager, the scheduler and a hollow node) when ../shared/k8s ships its
  components, else etcd and kube-apiserver alone. Without the binaries (../shared/k8s, or
  $KUBECOORD_KUBE_APISERVER) every test that uses it is skipped with the reason.
- ``real_cluster``: the same server, for tests of what only a whole cluster does (skipped
  with the reason when it is an API server alone).
- ``real_kubeconfig``: its admin (system:masters) kubeconfig path; pass it explicitly,
  KUBECONFIG is neither read nor set.
- ``le_candidate``: client-go's LeaseLock candidate, unpacked (runs against any server).

Cassandra 5.0 (Maven's jars, ``make cassandra-jars``; ``kubecoord_testkit.servers.cassandra``):

- ``cassandra_server``: one node for the whole session (per xdist worker); tests isolate
  themselves by names. ``KUBECOORD_TEST_CASSANDRA_HOSTS`` (HOST:PORT[,...]) points the
  session at a server already running instead. Without java or the jars every test that
  uses it is skipped with the reason.
- ``cassandra_cluster``: three nodes on 127.0.0.1-3 (RF 3 keyspaces), for one module's
  fault tests (module scope: it takes minutes to start on a loaded 2-core machine).

etcd 3.5 (kubecoord-etcd, which ``make etcd`` builds; ``kubecoord_testkit.servers.etcd``):

- ``etcd_server``: one member for the whole session (per xdist worker); tests isolate
  themselves by key prefix.
- ``etcd_cluster``: three members on 127.0.0.1, for one module's failover tests (members
  killed and restarted).

Spark (``kubecoord_testkit.servers.spark``, needs pyspark):

- ``spark_standalone``: a Spark standalone master and two workers (1 core, 1 GiB each) on
  127.0.0.1 from the pyspark installation, for the session; stopped and reaped at the end.

Scripted servers (``kubecoord_testkit.faults.server``):

- ``scripted_server``: starts a ScriptedServer whose connections go to the handler given
  (``scripted_server(handler, address="127.0.0.2")``); every one started is closed at the
  end of the test.

Not provided: clients, namespaces, CRDs — a suite's own glue builds those on top.
"""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kubecoord_testkit.emulator import ApiEmulator
    from kubecoord_testkit.faults.server import Handler, ScriptedServer, StartServer
    from kubecoord_testkit.servers.cassandra import CassandraServer
    from kubecoord_testkit.servers.etcd import EtcdCluster
    from kubecoord_testkit.servers.kubernetes import RealApiServer
    from kubecoord_testkit.servers.spark import StandaloneCluster
    from kubecoord_testkit.servers.zookeeper import ZooKeeperServer


@pytest.fixture(scope="session")
def api_emulator() -> Iterator[ApiEmulator]:
    from kubecoord_testkit.emulator import ApiEmulator

    api = ApiEmulator(host="127.0.0.1", port=0)
    api.start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(scope="session")
def kubeconfig_path(api_emulator: ApiEmulator, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return api_emulator.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One standalone server for the whole run (tests isolate themselves by chroot)."""
    from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

    with ZooKeeperServer.standalone(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def private_zookeeper(tmp_path: pathlib.Path) -> Iterator[ZooKeeperServer]:
    """A standalone server of the test's own, for tests that stop or freeze the server."""
    from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

    with ZooKeeperServer.standalone(tmp_path) as server:
        yield server


@pytest.fixture
def zookeeper_ensemble(tmp_path: pathlib.Path) -> Iterator[ZooKeeperServer]:
    """Three servers on loopback forming one ensemble, for failover tests."""
    from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

    with ZooKeeperServer.ensemble(tmp_path, 3) as ensemble:
        yield ensemble


@pytest.fixture
def zookeeper_url(zookeeper_server: ZooKeeperServer) -> str:
    """A URL with a chroot no other test uses."""
    return f"zookeeper://{zookeeper_server.hosts}/test-{uuid.uuid4().hex[:12]}"


def serve_real_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealApiServer]:
    """A started RealApiServer — the whole cluster (controller manager, scheduler, a hollow
    node) when its components are shipped beside kube-apiserver — stopped and reaped when the
    generator ends; skips the test without the binaries. For fixtures of other scopes
    (``yield from serve_real_api(...)``)."""
    from kubecoord_testkit.servers.kubernetes import CLUSTER_COMPONENTS, BinariesNotFound, RealApiServer, find_binaries

    try:
        binaries = find_binaries()
    except BinariesNotFound as exc:
        pytest.skip(f"real kube-apiserver tier: {exc}")
    cluster = all(binaries.component(name) is not None for name in CLUSTER_COMPONENTS)
    with RealApiServer(binaries, tmp_path_factory.mktemp("real-k8s"), cluster=cluster) as server:
        yield server


@pytest.fixture(scope="session")
def real_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealApiServer]:
    yield from serve_real_api(tmp_path_factory)


@pytest.fixture(scope="session")
def real_kubeconfig(real_api: RealApiServer) -> pathlib.Path:
    return real_api.admin_kubeconfig


@pytest.fixture(scope="session")
def real_cluster(real_api: RealApiServer) -> RealApiServer:
    """``real_api`` for tests of what a whole cluster does (garbage collection, namespace
    deletion, ServiceAccounts, Pods Running); skipped with the reason when the cluster
    components are not shipped beside kube-apiserver."""
    if not real_api.cluster:
        pytest.skip("whole-cluster tier: no kube-controller-manager, kube-scheduler and kubemark beside "
                    f"{real_api.binaries.apiserver}")
    return real_api


@pytest.fixture(scope="session")
def le_candidate(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """client-go's candidate, unpacked; it needs no real server (it runs on the emulator too)."""
    from kubecoord_testkit.servers.kubernetes import BinariesNotFound, find_binaries, unpacked

    try:
        binaries = find_binaries()
    except BinariesNotFound as exc:
        pytest.skip(f"client-go interop: {exc}")
    if binaries.le_candidate is None:
        pytest.skip(f"client-go interop: no le-candidate[.xz] beside {binaries.apiserver}")
    return unpacked(binaries.le_candidate)


@pytest.fixture(scope="session")
def cassandra_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraServer]:
    """One Cassandra node for the whole run (tests isolate themselves by name)."""
    from kubecoord_testkit.servers.cassandra import CassandraServer, external, jars_missing

    hosts = os.environ.get("KUBECOORD_TEST_CASSANDRA_HOSTS")
    if hosts:
        yield external(hosts)
        return
    reason = jars_missing()
    if reason is not None:
        pytest.skip(f"Cassandra tier: {reason}")
    with CassandraServer.single(tmp_path_factory.mktemp("cassandra")) as server:
        yield server


@pytest.fixture(scope="module")
def cassandra_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraServer]:
    """Three Cassandra nodes on 127.0.0.1, .2, .3, for fault tests (one module at a time)."""
    from kubecoord_testkit.servers.cassandra import CassandraServer, jars_missing

    reason = jars_missing()
    if reason is not None:
        pytest.skip(f"Cassandra tier: {reason}")
    with CassandraServer.cluster(tmp_path_factory.mktemp("cassandra-cluster"), 3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """One etcd member for the whole run (tests isolate themselves by key prefix)."""
    from kubecoord_testkit.servers.etcd import EtcdCluster

    with EtcdCluster.single(tmp_path_factory.mktemp("etcd")) as server:
        yield server


@pytest.fixture(scope="module")
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """Three etcd members on 127.0.0.1, for failover tests (one module at a time)."""
    from kubecoord_testkit.servers.etcd import EtcdCluster

    with EtcdCluster.cluster(tmp_path_factory.mktemp("etcd-cluster"), 3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and two workers (1 core, 1 GiB each) on 127.0.0.1, started
    from the pyspark installation; stopped and reaped at the end of the session."""
    from kubecoord_testkit.servers.spark import StandaloneCluster

    with StandaloneCluster(workers=2, cores=1, memory="1g", log_dir=tmp_path_factory.mktemp("standalone")) as cluster:
        yield cluster


@pytest.fixture
def scripted_server() -> Iterator[StartServer]:
    """Starts a ScriptedServer: ``scripted_server(handler, address=...)``; closes each one
    started when the test ends."""
    from kubecoord_testkit.faults.server import ScriptedServer

    servers: list[ScriptedServer] = []

    def start(handler: Handler, *, address: str = "127.0.0.1") -> ScriptedServer:
        servers.append(ScriptedServer(handler, address=address))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
