"""Real ZooKeeper servers for tests and benchmarks: standalone or a loopback ensemble.

Status: test support. Usage::

    with ZooKeeperServer.standalone(tmp_path) as server:
        coord = kubecoord.connect(f"zookeeper://{server.hosts}/my-test")

Starts Debian's jars (``apt-get install zookeeper libslf4j-java``; /usr/share/java) with
``java -cp zookeeper.jar ...``: the jar's manifest names its dependencies. Every server
listens on 127.0.0.1 only (clientPortAddress), on free ports, with the admin HTTP server
off and the ``ruok``/``srvr`` four-letter words whitelisted; ready means ``ruok`` answers
``imok`` and ``srvr`` reports a mode (ruok answers before sessions are accepted).
A small tickTime (200 ms) lets clients use sessions of 0.4 s and up; sessions may last
up to 60 s unless ``max_session_timeout`` (seconds) sets the servers' maxSessionTimeout
lower, so that they negotiate a longer requested timeout down to it.

Guarantees: stop() and kill() wait() on the JVM, so no zombie is left even though PID 1
here does not reap orphans. Not guaranteed: that ports chosen free stay free until the
JVM binds them (another process may grab one in between; start() then fails clearly).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from kubecoord_testkit import processes
from kubecoord_testkit.servers.managed import free_port

JARS_DIR = Path(os.environ.get("KUBECOORD_ZOOKEEPER_JARS", "/usr/share/java"))
STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_MS = 200
JVM_OPTIONS = ["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter word (ruok, srvr) and return the answer; '' if unreachable."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.sendall(word.encode())
            chunks = []
            while chunk := conn.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def classpath() -> str:
    jars = [JARS_DIR / "zookeeper.jar", JARS_DIR / "slf4j-simple.jar"]
    missing = [str(jar) for jar in jars if not jar.exists()]
    if missing:
        raise FileNotFoundError(f"ZooKeeper jars missing: {missing}; run `make system-deps`")
    return ":".join(str(jar) for jar in jars)


@dataclass
class ServerProcess:
    """One ZooKeeper JVM: its config, data dir, client port and process."""

    data_dir: Path
    client_port: int
    config: dict[str, str]
    main_class: str
    myid: int | None = None
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.data_dir / "server.log"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.myid is not None:
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
        config_path = self.data_dir / "zoo.cfg"
        config_path.write_text("".join(f"{key}={value}\n" for key, value in self.config.items()))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["java", *JVM_OPTIONS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                 "-cp", classpath(), self.main_class, str(config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        # ruok answers before the server takes sessions; srvr shows a Mode only once it does.
        return self.running and four_letter_word(self.client_port, "ruok") == "imok" and bool(self.mode())

    def mode(self) -> str:
        """'leader', 'follower' or 'standalone' from ``srvr``; '' if not serving."""
        for line in four_letter_word(self.client_port, "srvr").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def signal(self, signum: int) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(signum)

    def kill(self) -> None:
        """kill -9 and reap."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGCONT)  # a stopped JVM still dies on SIGKILL; CONT is harmless
            self.process.kill()
        self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; always reaped."""
        if self.process is not None:
            processes.stop(self.process, timeout)

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


DEFAULT_MAX_SESSION_TIMEOUT = 60.0


def _base_config(data_dir: Path, port: int, max_session_timeout: float) -> dict[str, str]:
    if not max_session_timeout * 1000 >= 2 * TICK_MS:
        raise ValueError(f"max_session_timeout must be at least {2 * TICK_MS / 1000} s (two ticks)")
    return {
        "tickTime": str(TICK_MS),
        "dataDir": str(data_dir),
        "clientPort": str(port),
        "clientPortAddress": "127.0.0.1",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "ruok,srvr",
        "minSessionTimeout": str(2 * TICK_MS),
        "maxSessionTimeout": str(round(max_session_timeout * 1000)),
        "maxClientCnxns": "0",
    }


class ZooKeeperServer:
    """A standalone server or an ensemble of loopback servers, stopped on exit."""

    def __init__(self, servers: Sequence[ServerProcess]) -> None:
        self.servers = list(servers)

    @classmethod
    def standalone(cls, root: Path, *, max_session_timeout: float = DEFAULT_MAX_SESSION_TIMEOUT) -> ZooKeeperServer:
        port = free_port()
        data_dir = root / "zk-standalone"
        config = _base_config(data_dir, port, max_session_timeout)
        return cls([ServerProcess(data_dir, port, config, STANDALONE_MAIN)])

    @classmethod
    def ensemble(
        cls, root: Path, size: int = 3, *, max_session_timeout: float = DEFAULT_MAX_SESSION_TIMEOUT
    ) -> ZooKeeperServer:
        ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
        peers = {f"server.{i + 1}": f"127.0.0.1:{quorum}:{election}" for i, (_, quorum, election) in enumerate(ports)}
        servers = []
        for index, (client, _, _) in enumerate(ports):
            data_dir = root / f"zk-{index + 1}"
            base = _base_config(data_dir, client, max_session_timeout)
            config = {**base, "initLimit": "10", "syncLimit": "5", **peers}
            servers.append(ServerProcess(data_dir, client, config, QUORUM_MAIN, myid=index + 1))
        return cls(servers)

    @property
    def hosts(self) -> str:
        """The connect string: 127.0.0.1:PORT[,127.0.0.1:PORT...]."""
        return ",".join(f"127.0.0.1:{server.client_port}" for server in self.servers)

    def start(self, timeout: float = 60.0) -> None:
        try:
            for server in self.servers:
                server.start()
            self.wait_ready(self.servers, timeout)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def wait_ready(servers: Sequence[ServerProcess], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for server in servers:
            while not server.ready():
                if not server.running:
                    raise RuntimeError(f"ZooKeeper exited during start-up:\n{server.log_tail()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"ZooKeeper not ready within {timeout} s:\n{server.log_tail()}")
                time.sleep(0.05)

    def leader(self) -> ServerProcess:
        """The ensemble member that is the ZooKeeper leader now (or the standalone server)."""
        for server in self.servers:
            if server.running and server.mode() in ("leader", "standalone"):
                return server
        raise LookupError("no ZooKeeper server reports itself leader")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

