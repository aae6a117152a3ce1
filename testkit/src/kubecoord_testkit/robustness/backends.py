"""The servers the robustness tier drives, each behind a fault proxy, and what each can suffer.

===========  ============================================  ==========================================
backend      server (127.0.0.1)                            clients; server fault
===========  ============================================  ==========================================
memory       none: memory://NAME is one process's state    threads (a killed client is a crashed
                                                           coordinator: kubecoord.testing.crash)
zookeeper    one standalone server (Debian's jars)         processes; kill -9 and start again (its
                                                           data kept); a single server, since a
                                                           follower's reads may be stale (ZooKeeper
                                                           promises sequential consistency, not
                                                           linearizable reads)
emulator     the Kubernetes API emulator (kubernetes://)   processes; stopped and started again
                                                           (objects kept)
kubernetes   kube-apiserver + etcd (../shared/k8s)         processes; kube-apiserver killed -9 and
                                                           started again (on a new port the proxy
                                                           follows); etcd killed -9 and started
                                                           again on its port under the running
                                                           kube-apiserver
kubernetes-  the whole cluster (``refk8s.sh up --cluster``  as kubernetes; the controller manager,
cluster      through RealApiServer(cluster=True)):         the scheduler and the hollow node follow
             etcd, kube-apiserver, controller manager,     the restarted kube-apiserver, and run
             scheduler, a hollow node                      through etcd's restarts
cassandra    one Cassandra 5.0 node (Maven's jars)         processes; kill -9 and start again
etcd         one etcd 3.5 member (kubecoord-etcd)          processes; kill -9 and start again (its
                                                           data kept)
===========  ============================================  ==========================================

Every client reaches the server through one ThreadedFaultProxy (delays, holds, drops, cuts).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from kubecoord_testkit.faults import ThreadedFaultProxy

CLIENT_KILL = "client-kill"
DELAY = "proxy-delay"
HOLD = "proxy-hold"
DROP = "proxy-drop"
CUT = "proxy-cut"
SERVER_RESTART = "server-restart"
ETCD_RESTART = "etcd-restart"
PROXY_FAULTS = (DELAY, HOLD, DROP, CUT)
COMMON_FAULTS = (CLIENT_KILL, *PROXY_FAULTS, SERVER_RESTART)
ALL_FAULTS = (*COMMON_FAULTS, ETCD_RESTART)


class Backend:
    name = ""
    threads = False
    """Clients are threads of this process (memory://), not processes."""
    faults: tuple[str, ...] = COMMON_FAULTS

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proxy: ThreadedFaultProxy | None = None

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.close()

    @property
    def url(self) -> str:
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        return {}

    def restart_server(self) -> str:
        """Kill the server (-9 where it is a process) and start it again; what was done."""
        raise NotImplementedError

    def restart_storage(self) -> str:
        """Kill the server's own storage (etcd under kube-apiserver) with -9 and start it
        again; what was done. Only backends whose ``faults`` list ``etcd-restart``."""
        raise NotImplementedError


class MemoryBackend(Backend):
    name = "memory"
    threads = True
    faults = (CLIENT_KILL,)

    def start(self) -> None:
        self._name = f"robust-{uuid.uuid4().hex[:8]}"

    @property
    def url(self) -> str:
        return f"memory://{self._name}"

    def options(self) -> dict[str, Any]:
        return {"lease_duration": 2.0}


class ZooKeeperBackend(Backend):
    name = "zookeeper"

    def start(self) -> None:
        from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

        self.server = ZooKeeperServer.standalone(self.workdir / "zookeeper")
        self.server.start()
        self.proxy = ThreadedFaultProxy(("127.0.0.1", self.server.servers[0].client_port)).start()
        self.chroot = f"robust-{uuid.uuid4().hex[:8]}"

    def stop(self) -> None:
        super().stop()
        self.server.stop()

    @property
    def url(self) -> str:
        assert self.proxy is not None
        return f"zookeeper://{self.proxy.address}/{self.chroot}"

    def options(self) -> dict[str, Any]:
        return {"lease_duration": 4.0, "connect_timeout": 30.0, "request_timeout": 3.0}

    def restart_server(self) -> str:
        from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

        server = self.server.servers[0]
        server.kill()
        time.sleep(0.5)
        server.start()
        ZooKeeperServer.wait_ready([server], timeout=90)
        return f"ZooKeeper on port {server.client_port} killed -9 and started again"


class _Kubernetes(Backend):
    timings: dict[str, Any] = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 0.5,
                               "request_timeout": 2.5}

    @property
    def url(self) -> str:
        return "kubernetes://default"

    def options(self) -> dict[str, Any]:
        return {**self.timings, "kubeconfig": str(self.kubeconfig)}

    def _front(self, admin: Path, upstream: tuple[str, int]) -> None:
        """The proxy, and a kubeconfig that reaches the server through it."""
        self.proxy = ThreadedFaultProxy(upstream).start()
        config = yaml.safe_load(admin.read_text())
        for cluster in config["clusters"]:
            scheme = cluster["cluster"]["server"].split("://", 1)[0]
            cluster["cluster"]["server"] = f"{scheme}://{self.proxy.address}"
        self.kubeconfig = self.workdir / "kubeconfig-proxied"
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)


class EmulatorBackend(_Kubernetes):
    name = "emulator"

    def start(self) -> None:
        from kubecoord_testkit.emulator import ApiEmulator

        self.api = ApiEmulator().start()
        self._front(self.api.write_kubeconfig(self.workdir / "kubeconfig"), ("127.0.0.1", self.api.port))

    def stop(self) -> None:
        super().stop()
        self.api.stop()

    def restart_server(self) -> str:
        self.api.stop()
        time.sleep(0.5)
        self.api.start()
        assert self.proxy is not None
        self.proxy.set_upstream(("127.0.0.1", self.api.port))
        return f"the API emulator stopped and started again on port {self.api.port} (objects kept)"


class KubernetesBackend(_Kubernetes):
    name = "kubernetes"
    timings = {"lease_duration": 5.0, "renew_deadline": 3.5, "retry_period": 0.5, "request_timeout": 3.0}
    faults = ALL_FAULTS
    cluster = False

    def start(self) -> None:
        from kubecoord_testkit.servers.kubernetes import RealApiServer, find_binaries

        self.server = RealApiServer(find_binaries(), self.workdir / "real-apiserver", cluster=self.cluster)
        self.server.__enter__()
        self._front(self.server.admin_kubeconfig, _address(self.server.url))

    def restart_storage(self) -> str:
        return self.server.restart_etcd()

    def stop(self) -> None:
        super().stop()
        self.server.stop()

    def restart_server(self) -> str:
        done = self.server.restart()
        assert self.proxy is not None
        self.proxy.set_upstream(_address(self.server.url))
        return done


class KubernetesClusterBackend(KubernetesBackend):
    """The whole cluster: the controller manager, the scheduler and a hollow node beside
    etcd and kube-apiserver, which the clients share with them (their watches and writes
    are the API server's load too)."""

    name = "kubernetes-cluster"
    cluster = True


class CassandraBackend(Backend):
    name = "cassandra"

    def start(self) -> None:
        from kubecoord_testkit.servers.cassandra import CassandraServer

        self.server = CassandraServer.single(self.workdir / "cassandra", restartable=True)
        self.server.start()
        node = self.server.nodes[0]
        self.proxy = ThreadedFaultProxy((node.address, node.native_port)).start()
        self.keyspace = f"robust_{uuid.uuid4().hex[:8]}"

    def stop(self) -> None:
        super().stop()
        self.server.stop()

    @property
    def url(self) -> str:
        assert self.proxy is not None
        return f"cassandra://{self.proxy.address}/{self.keyspace}"

    def options(self) -> dict[str, Any]:
        return {"lease_duration": 4, "renew_deadline": 2.4, "retry_period": 0.5, "poll_period": 0.25,
                "request_timeout": 2.0, "connect_timeout": 30.0}

    def restart_server(self) -> str:
        node = self.server.nodes[0]
        node.kill()
        time.sleep(0.5)
        self.server.restart(node, timeout=180)
        return f"the Cassandra node on port {node.native_port} killed -9 and started again"


class EtcdBackend(Backend):
    name = "etcd"

    def start(self) -> None:
        from kubecoord_testkit.servers.etcd import EtcdCluster

        self.server = EtcdCluster.single(self.workdir / "etcd")
        self.server.start()
        self.proxy = ThreadedFaultProxy(("127.0.0.1", self.server.members[0].client_port)).start()
        self.prefix = f"robust-{uuid.uuid4().hex[:8]}"

    def stop(self) -> None:
        super().stop()
        self.server.stop()

    @property
    def url(self) -> str:
        assert self.proxy is not None
        return f"etcd://{self.proxy.address}/{self.prefix}"

    def options(self) -> dict[str, Any]:
        return {"lease_duration": 4, "renew_deadline": 2.4, "retry_period": 0.4, "request_timeout": 2.0}

    def restart_server(self) -> str:
        self.server.kill(0)
        time.sleep(0.5)
        self.server.restart(0)
        return f"etcd on port {self.server.members[0].client_port} killed -9 and started again"


def _address(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].rstrip("/").rsplit(":", 1)
    return host, int(port)


BACKENDS: dict[str, type[Backend]] = {
    backend.name: backend
    for backend in (MemoryBackend, ZooKeeperBackend, EmulatorBackend, KubernetesBackend, KubernetesClusterBackend,
                    CassandraBackend, EtcdBackend)
}
