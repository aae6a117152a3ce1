"""The servers a soak runs against, each behind fault proxies, and their restarts.

=====================  ==========================================  =======================
backend                servers (all on 127.0.0.1)                  restarts
=====================  ==========================================  =======================
zookeeper              a 3-node ensemble (Debian's jars)           a follower, the leader
                                                                   (kill -9, start again);
                                                                   the election's znodes and
                                                                   the store's tree deleted
                                                                   behind the clients
emulator               the API emulator (kubernetes://)            the emulator (stop and
                                                                   start: objects kept)
kubernetes             kube-apiserver + etcd (../shared/k8s,       kube-apiserver; etcd
                       kubecoord_testkit.servers.kubernetes)       (then the apiserver)
cassandra              one Cassandra 5.0 node (Maven's jars,       the node (kill -9, start
                       kubecoord_testkit.servers.cassandra)        again); the store's
                                                                   partition deleted behind
                                                                   the clients
etcd                   a 3-member cluster (etcd 3.5.36,            a follower, the Raft
                       kubecoord_testkit.servers.etcd)             leader (kill -9, start
                                                                   again); the store's keys
                                                                   deleted behind the
                                                                   clients
=====================  ==========================================  =======================

Clients reach every server through a ThreadedFaultProxy, so a proxy fault hits all of
them; the soak's own observer (who leads now?) and the deleter connect directly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.soak.schedule import DELETE_CONFIGMAP, DELETE_LEASE

ZK_FOLLOWER_RESTART = "zookeeper_follower_restart"
ZK_LEADER_RESTART = "zookeeper_leader_restart"
ZK_DELETE_ELECTION = "zookeeper_delete_election"
ZK_DELETE_STORE = "zookeeper_delete_store"
CASSANDRA_RESTART = "cassandra_restart"
CASSANDRA_DELETE_STORE = "cassandra_delete_store"
EMULATOR_RESTART = "emulator_restart"
APISERVER_RESTART = "apiserver_restart"
ETCD_RESTART = "etcd_restart"
ETCD_FOLLOWER_RESTART = "etcd_follower_restart"
ETCD_LEADER_RESTART = "etcd_leader_restart"
ETCD_DELETE_STORE = "etcd_delete_store"


class SoakBackend:
    name = ""
    scheme = ""
    lease = 4.0
    """Seconds: the lease / session a client may outlive a fault by."""
    extra_kinds: tuple[str, ...] = ()

    def __init__(self, workdir: Path, seed: int) -> None:
        self.workdir = workdir
        self.seed = seed
        self.proxies: list[ThreadedFaultProxy] = []
        self.election = ""
        self.group = ""
        self.store = ""
        self.logs: Path | None = None
        """Where the soak's event logs go (an operator's own log goes there too)."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        for proxy in self.proxies:
            proxy.close()

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def direct_url(self) -> str:
        """The same backend without the proxies (the observer's view)."""
        return self.url

    def options(self) -> dict[str, Any]:
        raise NotImplementedError

    def direct_options(self) -> dict[str, Any]:
        return self.options()

    def inject(self, kind: str, pick: int) -> str:
        """Perform one of ``extra_kinds`` (blocking until it is over); what was done."""
        raise NotImplementedError(kind)

    def close_clients(self) -> None:
        """Release what inject() opened (a deleter's client)."""

    def after_fault(self) -> str:
        """Between faults: restart what a deployment would restart (an operator that exited);
        what was done, or ""."""
        return ""


class ZooKeeperBackend(SoakBackend):
    name = scheme = "zookeeper"
    lease = 4.0
    extra_kinds = (ZK_FOLLOWER_RESTART, ZK_LEADER_RESTART, ZK_DELETE_ELECTION, ZK_DELETE_STORE)

    def start(self) -> None:
        from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

        self.ensemble = ZooKeeperServer.ensemble(self.workdir / "zookeeper", 3)
        self.ensemble.start()
        for server in self.ensemble.servers:
            self.proxies.append(ThreadedFaultProxy(("127.0.0.1", server.client_port)).start())
        self.chroot = f"soak-{self.seed}"

    def stop(self) -> None:
        super().stop()
        self.ensemble.stop()

    @property
    def url(self) -> str:
        return f"zookeeper://{','.join(proxy.address for proxy in self.proxies)}/{self.chroot}"

    @property
    def direct_url(self) -> str:
        return f"zookeeper://{self.ensemble.hosts}/{self.chroot}"

    def options(self) -> dict[str, Any]:
        return {"lease_duration": self.lease, "connect_timeout": 30.0}

    def inject(self, kind: str, pick: int) -> str:
        from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

        if kind == ZK_DELETE_ELECTION:
            return self._delete_election_node(pick)
        if kind == ZK_DELETE_STORE:
            from kubecoord_testkit.soak.deletions import delete_store_tree

            return delete_store_tree(self.ensemble.hosts, f"/{self.chroot}/kv/{self.store}")
        if kind == ZK_LEADER_RESTART:
            server = self.ensemble.leader()
        else:
            followers = [s for s in self.ensemble.servers if s.running and s.mode() == "follower"]
            if not followers:
                return "nothing (no follower serving)"
            server = followers[pick % len(followers)]
        role = "leader" if kind == ZK_LEADER_RESTART else "follower"
        server.kill()
        time.sleep(1.0)
        server.start()
        ZooKeeperServer.wait_ready([server], timeout=90)
        return f"{role} on port {server.client_port} killed -9 and started again"


    def _delete_election_node(self, pick: int) -> str:
        from kubecoord_testkit.soak.deletions import delete_election_znode

        return delete_election_znode(self.ensemble.hosts, f"/{self.chroot}/elections/{self.election}", pick)


class CassandraBackend(SoakBackend):
    """One node (a cluster takes minutes to start here; tests/backends/cassandra/test_cluster.py kills
    a node of one). No deletion of the election's rows: a holder row deleted behind its
    holder reads as released, and a follower may lead before the holder's renew deadline
    has passed (the README's non-guarantees) — a fault the soak would only report."""

    name = scheme = "cassandra"
    lease = 4.0
    extra_kinds = (CASSANDRA_RESTART, CASSANDRA_DELETE_STORE)

    def start(self) -> None:
        from kubecoord_testkit.servers.cassandra import CassandraServer

        self.server = CassandraServer.single(self.workdir / "cassandra", restartable=True)
        self.server.start()
        node = self.server.nodes[0]
        self.proxies.append(ThreadedFaultProxy((node.address, node.native_port)).start())
        self.keyspace = f"soak_{self.seed}"

    def stop(self) -> None:
        super().stop()
        self.server.stop()

    @property
    def url(self) -> str:
        return f"cassandra://{self.proxies[0].address}/{self.keyspace}"

    @property
    def direct_url(self) -> str:
        return f"cassandra://{self.server.hosts}/{self.keyspace}"

    def options(self) -> dict[str, Any]:
        return {"lease_duration": int(self.lease), "renew_deadline": 2.4, "retry_period": 0.5,
                "poll_period": 0.25, "request_timeout": 2.0, "connect_timeout": 30.0}

    def inject(self, kind: str, pick: int) -> str:
        import kubecoord

        if kind == CASSANDRA_DELETE_STORE:
            with kubecoord.connect(self.direct_url, **self.direct_options()) as coordinator:
                found = coordinator.purge("kv", self.store)  # type: ignore[attr-defined]
            return f"store {self.store!r} deleted ({'it existed' if found else 'nothing there yet'})"
        node = self.server.nodes[0]
        node.kill()
        time.sleep(1.0)
        self.server.restart(node, timeout=180)
        return f"the node on port {node.native_port} killed -9 and started again"


class EtcdBackend(SoakBackend):
    """A 3-member cluster, each member behind a proxy. No deletion of the election's keys: a
    candidate key deleted behind its leader is noticed on the leader's next watch event,
    after its successor may have started (docs/backends/etcd.md's non-guarantees)."""

    name = scheme = "etcd"
    lease = 4.0
    extra_kinds = (ETCD_FOLLOWER_RESTART, ETCD_LEADER_RESTART, ETCD_DELETE_STORE)

    def start(self) -> None:
        from kubecoord_testkit.servers.etcd import EtcdCluster

        self.cluster = EtcdCluster.cluster(self.workdir / "etcd", 3)
        self.cluster.start()
        for member in self.cluster.members:
            self.proxies.append(ThreadedFaultProxy(("127.0.0.1", member.client_port)).start())
        self.prefix = f"soak-{self.seed}"

    def stop(self) -> None:
        super().stop()
        self.cluster.stop()

    @property
    def url(self) -> str:
        return f"etcd://{','.join(proxy.address for proxy in self.proxies)}/{self.prefix}"

    @property
    def direct_url(self) -> str:
        return f"etcd://{self.cluster.hosts}/{self.prefix}"

    def options(self) -> dict[str, Any]:
        return {"lease_duration": int(self.lease), "renew_deadline": 2.4, "retry_period": 0.4, "request_timeout": 2.0}

    def inject(self, kind: str, pick: int) -> str:
        import kubecoord

        if kind == ETCD_DELETE_STORE:
            with kubecoord.connect(self.direct_url, **self.direct_options()) as coordinator:
                found = coordinator.purge("kv", self.store)  # type: ignore[attr-defined]
            return f"store {self.store!r} deleted ({found} keys)"
        leader = self.cluster.leader()
        if kind == ETCD_LEADER_RESTART:
            index, role = leader, "Raft leader"
        else:
            followers = [i for i, m in enumerate(self.cluster.members) if m.running and i != leader]
            index, role = followers[pick % len(followers)], "follower"
        self.cluster.kill(index)
        time.sleep(1.0)
        self.cluster.restart(index)
        return f"etcd {role} {self.cluster.members[index].name} killed -9 and started again"


class _KubernetesBase(SoakBackend):
    scheme = "kubernetes"
    lease = 4.0
    namespace = "default"
    extra_kinds: tuple[str, ...] = (DELETE_LEASE, DELETE_CONFIGMAP)

    def __init__(self, workdir: Path, seed: int) -> None:
        super().__init__(workdir, seed)
        self._deleter: Any = None
        self.operator: Any = None
        self.operator_restarts = 0

    def _start_operator(self) -> None:
        """The election, group and store as kubecoord.dev resources with the soak's timings,
        served by a ``kubecoord operator`` process (soak/operator.py): the clients bind to
        them, and the operator re-creates a deleted Lease or ConfigMap."""
        from kubecoord_testkit.soak.operator import SoakOperator

        history = None if self.logs is None else self.logs / "operator.jsonl"
        self.operator = SoakOperator(self.control_kubeconfig, self.namespace, self.workdir / "operator", history)
        self.operator.install(election=self.election, group=self.group, store=self.store, timings=self._timings())
        self.operator.start(election=self.election)

    def after_fault(self) -> str:
        # The operator steps down (exits 1) when it cannot renew its own Lease for its renew
        # deadline, as during a long server restart; its Deployment would start it again.
        if self.operator is None or self.operator.alive():
            return ""
        code = self.operator.process.returncode
        self.operator.start(election=self.election)
        self.operator_restarts += 1
        return f"the operator had exited ({code}); started again"

    @property
    def url(self) -> str:
        return f"kubernetes://{self.namespace}"

    def _timings(self) -> dict[str, Any]:
        return {"lease_duration": self.lease, "renew_deadline": 3.0, "retry_period": 0.75, "request_timeout": 2.5}

    def options(self) -> dict[str, Any]:
        return {**self._timings(), "kubeconfig": str(self.proxied_kubeconfig)}

    def direct_options(self) -> dict[str, Any]:
        return {**self._timings(), "kubeconfig": str(self.control_kubeconfig)}

    def _front(self, admin: Path, upstream: tuple[str, int]) -> None:
        """The clients' proxy (faulted) and the soak's own (never faulted: it follows the
        server to a new port after a restart, so the observer and the deleter keep working)."""
        proxy = ThreadedFaultProxy(upstream).start()
        self.proxies.append(proxy)
        self.control = ThreadedFaultProxy(upstream).start()
        self.proxied_kubeconfig = self._write_proxied(admin, proxy, "kubeconfig-proxied")
        self.control_kubeconfig = self._write_proxied(admin, self.control, "kubeconfig-control")

    def _write_proxied(self, admin: Path, proxy: ThreadedFaultProxy, name: str) -> Path:
        config = yaml.safe_load(admin.read_text())
        for cluster in config["clusters"]:
            scheme = cluster["cluster"]["server"].split("://", 1)[0]
            cluster["cluster"]["server"] = f"{scheme}://{proxy.address}"
        path = self.workdir / name
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def _follow(self, upstream: tuple[str, int]) -> None:
        for proxy in (*self.proxies, self.control):
            proxy.set_upstream(upstream)

    def stop(self) -> None:
        self.close_clients()
        if self.operator is not None:
            self.operator.stop()
        super().stop()
        self.control.close()

    def inject(self, kind: str, pick: int) -> str:
        if kind in (DELETE_LEASE, DELETE_CONFIGMAP):
            from kubecoord_testkit.soak.deletions import Deleter

            if self._deleter is None:
                self._deleter = Deleter(self.control_kubeconfig, self.namespace)
            if kind == DELETE_LEASE:
                return str(self._deleter.delete_lease(election=self.election, group=self.group, pick=pick))
            return str(self._deleter.delete_configmap(store=self.store, pick=pick))
        return self._restart(kind, pick)

    def _restart(self, kind: str, pick: int) -> str:
        raise NotImplementedError(kind)

    def close_clients(self) -> None:
        if self._deleter is not None:
            self._deleter.close()
            self._deleter = None


class EmulatorBackend(_KubernetesBase):
    name = "emulator"
    extra_kinds = (*_KubernetesBase.extra_kinds, EMULATOR_RESTART)

    def start(self) -> None:
        from kubecoord_testkit.emulator import ApiEmulator

        self.api = ApiEmulator().start()
        self._front(self.api.write_kubeconfig(self.workdir / "kubeconfig"), ("127.0.0.1", self.api.port))
        self._start_operator()

    def stop(self) -> None:
        super().stop()
        self.api.stop()

    def _restart(self, kind: str, pick: int) -> str:
        self.api.stop()
        time.sleep(1.0)
        self.api.start()
        return f"emulator stopped and started again on port {self.api.port} (objects kept)"


class RealKubernetesBackend(_KubernetesBase):
    name = "kubernetes"
    extra_kinds = (*_KubernetesBase.extra_kinds, APISERVER_RESTART, ETCD_RESTART)
    lease = 5.0

    def _timings(self) -> dict[str, Any]:
        return {"lease_duration": self.lease, "renew_deadline": 3.5, "retry_period": 1.0, "request_timeout": 3.0}

    def start(self) -> None:
        from kubecoord_testkit.servers.kubernetes import RealApiServer, find_binaries

        self.server = RealApiServer(find_binaries(), self.workdir / "real-apiserver")
        self.server.__enter__()
        self._front(self.server.admin_kubeconfig, _address(self.server.url))
        self._start_operator()

    def stop(self) -> None:
        super().stop()
        self.server.stop()

    def _restart(self, kind: str, pick: int) -> str:
        # The apiserver comes back on a new port: the proxies send new connections there.
        done = str(self.server.restart(etcd=kind == ETCD_RESTART))
        self._follow(_address(self.server.url))
        return done


def _address(url: str) -> tuple[str, int]:
    host_port = url.split("://", 1)[1].rstrip("/")
    host, port = host_port.rsplit(":", 1)
    return host, int(port)


def describe(options: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in options.items() if k != "kubeconfig"}, sort_keys=True)


BACKENDS: dict[str, type[SoakBackend]] = {
    "zookeeper": ZooKeeperBackend,
    "cassandra": CassandraBackend,
    "etcd": EtcdBackend,
    "emulator": EmulatorBackend,
    "kubernetes": RealKubernetesBackend,
}
