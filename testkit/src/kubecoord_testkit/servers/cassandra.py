"""Real Apache Cassandra 5.0 servers for tests and benchmarks: one node or a loopback cluster.

Status: test support. Usage::

    with CassandraServer.single(tmp_path) as server:
        coord = kubecoord.connect(f"cassandra://{server.hosts}/my_keyspace")

The jars are cassandra-all and its runtime dependencies, pinned by testkit/cassandra/pom.xml
and copied by Maven (``make cassandra-jars``: ``mvn dependency:copy-dependencies``) into
JARS_DIR, a cache folder reused between runs (``KUBECOORD_CASSANDRA_JARS`` overrides it).
``jars_missing()`` says why servers cannot start (no java, no jars), so tests skip with a
reason instead of failing.

Each node is one JVM (Java 17) started as Cassandra's own scripts would start it: the
``--add-exports``/``--add-opens`` of its ``conf/jvm17-server.options``, the jamm agent,
a 512 MiB heap, C1 only, and the test speed-ups: no wait for gossip to settle, a 100 ms
ring delay (10 s in a cluster), ``unsafesystem`` (one node only: no fsync of the system
tables). Its cassandra.yaml is minimal:
data, commit log, hints and caches under the node's own folder, loopback listen and RPC
addresses, free storage and native-transport ports, Paxos v2. A cluster's nodes listen on
127.0.0.1, 127.0.0.2, 127.0.0.3... (Linux routes all of 127/8 to loopback) with one
storage port shared by all (gossip addresses a peer by address and that port) and one
native port each (so that one node can be cut by address); its keyspaces use RF 3.
Ready = the native port answers a CQL query (``SELECT release_version FROM system.local``)
through cassandra-driver, and for a cluster, every node sees the others up.

Guarantees: stop() and kill() wait() on the JVM (PID 1 here does not reap orphans); a
start that fails half-way stops what it started. Not guaranteed: that a port chosen free
stays free until the JVM binds it (start() then fails, with the log's tail).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubecoord_testkit import processes
from kubecoord_testkit.servers.managed import ManagedServers, free_port

CASSANDRA_VERSION = "5.0.6"
JARS_DIR = Path(
    os.environ.get(
        "KUBECOORD_CASSANDRA_JARS",
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubecoord" / f"cassandra-{CASSANDRA_VERSION}",
    )
)
COMPLETE_MARKER = ".complete"
"""Written by ``make cassandra-jars`` once Maven copied every jar (a half copy is not used)."""
MAIN_CLASS = "org.apache.cassandra.service.CassandraDaemon"
HEAP = "512m"

# Cassandra 5.0's conf/jvm17-server.options (JPMS and Netty), without its G1 tuning for big heaps.
JVM17_OPTIONS = [
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
]
SPEED_UPS = [
    "-Dcassandra.skip_wait_for_gossip_to_settle=0",
    "-Dcassandra.superuser_setup_delay_ms=0",
    "-Dcassandra.consistent.rangemovement=false",
    "-Dcassandra.use_deterministic_table_id=true",
]
LOGBACK = """<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level [%thread] %logger{20} %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDOUT"/></root>
  <logger name="org.apache.cassandra.service.StorageService" level="INFO"/>
  <logger name="org.apache.cassandra.gms.Gossiper" level="INFO"/>
</configuration>
"""


def jars_missing() -> str | None:
    """Why no server can start here (no java, no jars), or None when both are present."""
    if not _which("java"):
        return "no java on PATH (Cassandra 5.0 needs Java 17)"
    if not (JARS_DIR / COMPLETE_MARKER).exists():
        return f"no Cassandra jars in {JARS_DIR}; run `make cassandra-jars` (Maven)"
    return None


def _which(program: str) -> bool:
    return any((Path(folder) / program).exists() for folder in os.environ.get("PATH", "").split(os.pathsep) if folder)


def classpath() -> str:
    reason = jars_missing()
    if reason is not None:
        raise FileNotFoundError(reason)
    return ":".join(str(jar) for jar in sorted(JARS_DIR.glob("*.jar")))


def _jamm() -> Path:
    found = sorted(JARS_DIR.glob("jamm-*.jar"))
    if not found:
        raise FileNotFoundError(f"no jamm agent jar in {JARS_DIR}")
    return found[0]


@dataclass
class Node:
    """One Cassandra JVM: its folder, addresses, ports and process."""

    root: Path
    address: str
    storage_port: int
    native_port: int
    seeds: str
    cluster_name: str
    ring_delay_ms: int = 100
    """A cluster's nodes wait longer: a joining node's gossip shadow round gives up after
    the ring delay, and at 100 ms a loaded seed answers too late ("Unable to gossip with
    any peers")."""
    unsafe_system: bool = True
    """Speed over durability: no durable writes for the system tables, no fsync, a periodic
    commit log. A cluster's nodes (and a restartable single node) are durable instead: a
    node killed with -9 and restarted would come back without the schema changes it took
    (INCOMPATIBLE_SCHEMA to its peers' reads) and without its last acknowledged writes."""
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.root / "server.log"

    @property
    def host(self) -> str:
        return f"{self.address}:{self.native_port}"

    def config(self) -> dict[str, Any]:
        return {
            "cluster_name": self.cluster_name,
            "num_tokens": 1,
            "auto_bootstrap": False,
            "allocate_tokens_for_local_replication_factor": None,
            "partitioner": "org.apache.cassandra.dht.Murmur3Partitioner",
            "endpoint_snitch": "SimpleSnitch",
            # A node that must survive kill -9 syncs its commit log before it acknowledges: with
            # "periodic", a killed node replays only up to its last sync marker and forgets up
            # to a period of acknowledged writes (a soak's single node lost fencing epochs so).
            **({"commitlog_sync": "periodic", "commitlog_sync_period": "10000ms"} if self.unsafe_system
               else {"commitlog_sync": "batch"}),
            "commitlog_segment_size": "8MiB",
            "data_file_directories": [str(self.root / "data")],
            "commitlog_directory": str(self.root / "commitlog"),
            "hints_directory": str(self.root / "hints"),
            "saved_caches_directory": str(self.root / "saved_caches"),
            "cdc_raw_directory": str(self.root / "cdc_raw"),
            "listen_address": self.address,
            "rpc_address": self.address,
            "storage_port": self.storage_port,
            "native_transport_port": self.native_port,
            "start_native_transport": True,
            "seed_provider": [
                {"class_name": "org.apache.cassandra.locator.SimpleSeedProvider", "parameters": [{"seeds": self.seeds}]}
            ],
            "paxos_variant": "v2",
            "storage_compatibility_mode": "NONE",
            "auto_snapshot": False,
            "snapshot_on_duplicate_row_detection": False,
            "concurrent_reads": 4,
            "concurrent_writes": 4,
            "concurrent_counter_writes": 2,
            "concurrent_materialized_view_writes": 2,
            "memtable_heap_space": "64MiB",
            "memtable_offheap_space": "64MiB",
            "key_cache_size": "0MiB",
            "counter_cache_size": "0MiB",
            "hinted_handoff_enabled": True,
            "max_hint_window": "10m",
            "read_request_timeout": "5000ms",
            "write_request_timeout": "2000ms",
            "cas_contention_timeout": "1000ms",
            "request_timeout": "10000ms",
            "compaction_throughput": "0MiB/s",
            "dynamic_snitch": False,
            "user_defined_functions_enabled": False,
        }

    def start(self) -> None:
        for folder in ("data", "commitlog", "hints", "saved_caches", "cdc_raw"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        config_path = self.root / "cassandra.yaml"
        config_path.write_text(_yaml(self.config()))
        logback_path = self.root / "logback.xml"
        logback_path.write_text(LOGBACK)
        command = [
            "java", "-ea", f"-Xms{HEAP}", f"-Xmx{HEAP}", "-Xss512k", "-XX:+UseG1GC",
            # C1 only: a test server starts sooner and never runs long enough to repay C2.
            "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=2",
            *JVM17_OPTIONS, *SPEED_UPS, f"-Dcassandra.ring_delay_ms={self.ring_delay_ms}",
            f"-Dcassandra.unsafesystem={str(self.unsafe_system).lower()}",
            f"-javaagent:{_jamm()}",
            f"-Dcassandra.config=file://{config_path}",
            f"-Dlogback.configurationFile=file://{logback_path}",
            f"-Dcassandra.logdir={self.root}",
            f"-Dcassandra.storagedir={self.root}",
            "-Dcassandra-foreground=yes",
            *(["-Dcassandra.skip_sync=true"] if self.unsafe_system else []),
            "-cp", classpath(), MAIN_CLASS,
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                start_new_session=True,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(signum)

    def kill(self) -> None:
        """kill -9 and reap."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        self.process.wait()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (Cassandra drains), then SIGKILL after ``timeout``; always reaped."""
        if self.process is not None:
            processes.stop(self.process, timeout)

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


def _yaml(config: dict[str, Any]) -> str:
    """cassandra.yaml from plain values (JSON is YAML; no PyYAML needed)."""
    return "".join(f"{key}: {json.dumps(value)}\n" for key, value in config.items() if value is not None)


class CassandraServer(ManagedServers):
    """One node or a cluster of loopback nodes, stopped (and reaped) on exit."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = list(nodes)
        self.started_in: float | None = None
        """Seconds from the first JVM's start to ready (measured by start())."""

    @classmethod
    def single(cls, root: Path, *, restartable: bool = False) -> CassandraServer:
        """One node; ``restartable``: its system tables durable, so that it comes back from
        kill -9 with its schema (a little slower to start)."""
        storage = free_port()
        node = Node(root / "node1", "127.0.0.1", storage, free_port(), "127.0.0.1", "kubecoord-test",
                    unsafe_system=not restartable)
        return cls([node])

    @classmethod
    def cluster(cls, root: Path, size: int = 3) -> CassandraServer:
        storage = free_port()
        addresses = [f"127.0.0.{index + 1}" for index in range(size)]
        return cls([
            Node(root / f"node{index + 1}", address, storage, free_port(), addresses[0], "kubecoord-cluster",
                 ring_delay_ms=10_000, unsafe_system=False)
            for index, address in enumerate(addresses)
        ])

    @property
    def hosts(self) -> str:
        """The URL's host list: ADDRESS:PORT[,ADDRESS:PORT...]."""
        return ",".join(node.host for node in self.nodes)

    @property
    def replication_factor(self) -> int:
        return min(3, len(self.nodes))

    def start(self, timeout: float = 180.0) -> None:
        begun = time.monotonic()
        # One at a time, the seed first: nodes started side by side fail their gossip shadow
        # round ("Unable to gossip with any peers"). auto_bootstrap is off: an empty cluster
        # has nothing to stream.
        for node in self.nodes:
            node.start()
            self.wait_ready([node], timeout)
        if len(self.nodes) > 1:
            self.wait_peers_up(timeout)
        self.started_in = time.monotonic() - begun

    def stop(self) -> None:
        """kill -9 every node and reap it: the data is a test's, and a graceful drain takes ~7 s."""
        processes.stop_all(
            [node.process for node in self.nodes if node.process is not None], 5.0, signum=signal.SIGKILL
        )

    def restart(self, node: Node, timeout: float = 180.0) -> None:
        """Start a stopped or killed node again (same folder, same ports) and wait for it."""
        node.start()
        self.wait_ready([node], timeout)
        if len(self.nodes) > 1:
            self.wait_peers_up(timeout)

    @staticmethod
    def wait_ready(nodes: Sequence[Node], timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        for node in nodes:
            while not query_answers(node):
                if not node.running:
                    raise RuntimeError(f"Cassandra exited during start-up:\n{node.log_tail()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Cassandra not ready within {timeout} s:\n{node.log_tail()}")
                time.sleep(0.5)

    def wait_peers_up(self, timeout: float = 120.0) -> None:
        """Every running node can reach every other: a write at consistency ALL to a probe
        table of replication factor len(nodes) succeeds through each of them."""
        deadline = time.monotonic() + timeout
        running = [node for node in self.nodes if node.running]
        while not all(_write_at_all(node, len(self.nodes)) for node in running):
            if time.monotonic() > deadline:
                raise TimeoutError("Cassandra nodes do not reach each other:\n" + running[-1].log_tail())
            time.sleep(0.5)


def _session(node: Node, timeout: float = 5.0) -> Any:
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    # This node only: the probe asks whether *it* answers.
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([node.address]))
    cluster = Cluster(
        [(node.address, node.native_port)], connect_timeout=timeout, control_connection_timeout=timeout,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile}, protocol_version=5,
    )
    return cluster, cluster.connect()


def query_answers(node: Node) -> bool:
    """Whether the node's native port answers a CQL query."""
    if not node.running:
        return False
    try:
        cluster, session = _session(node)
    except Exception:
        return False
    try:
        return session.execute("SELECT release_version FROM system.local", timeout=5).one() is not None
    except Exception:
        return False
    finally:
        cluster.shutdown()


def _write_at_all(node: Node, replicas: int) -> bool:
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    try:
        cluster, session = _session(node)
    except Exception:
        return False
    try:
        session.execute(
            "CREATE KEYSPACE IF NOT EXISTS kubecoord_probe WITH replication = "
            f"{{'class': 'SimpleStrategy', 'replication_factor': {replicas}}}", timeout=20,
        )
        session.execute("CREATE TABLE IF NOT EXISTS kubecoord_probe.probe (k int PRIMARY KEY, v int)", timeout=20)
        statement = SimpleStatement(
            "INSERT INTO kubecoord_probe.probe (k, v) VALUES (1, 1)", consistency_level=ConsistencyLevel.ALL
        )
        session.execute(statement, timeout=5)
        return True
    except Exception:
        return False
    finally:
        cluster.shutdown()


def external(hosts: str) -> CassandraServer:
    """A CassandraServer naming nodes that run already (HOST:PORT[,...]): nothing to start or stop."""
    nodes = []
    for host in hosts.split(","):
        address, _, port = host.rpartition(":")
        nodes.append(Node(Path("/nonexistent"), address, 0, int(port), address, "external"))
    return CassandraServer(nodes)
