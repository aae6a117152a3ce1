"""A Spark standalone cluster on 127.0.0.1 from the pyspark installation: one master and
N workers, for the tests and the benchmark (and for trying the cluster path locally).

Usage::

    with StandaloneCluster(workers=2, cores=1, memory="1g") as cluster:
        subprocess.run(["kubecoord", "analyze", "logs", "--out", "out", "--master", cluster.url, ...])

Every process binds 127.0.0.1 on a free port, is waited for with a readiness check (the
master's JSON status page lists every worker alive), and is stopped and wait()ed on
exit, workers first (a worker stops and reaps its executors). Logs go to ``log_dir``.
Not guaranteed: a port taken between choosing it and binding it (retry).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO

from kubecoord.errors import CoordinationError

READY_TIMEOUT = 90.0
LOG4J2 = Path(__file__).with_name("log4j2.properties")


class ClusterStartError(CoordinationError):
    """The master or a worker did not come up in time."""


def spark_home() -> Path:
    """The pyspark package directory: it ships bin/spark-class and the jars."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterStartError("pyspark is not installed")
    return Path(spec.origin).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class StandaloneCluster:
    def __init__(self, *, workers: int = 2, cores: int = 1, memory: str = "1g", log_dir: Path | None = None) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="kubecoord-spark-standalone-"))
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self._processes: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []

    def __enter__(self) -> StandaloneCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        home = spark_home()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_DAEMON_JAVA_OPTS": f"-Dlog4j2.configurationFile=file:{LOG4J2}",
        }
        spark_class = str(home / "bin" / "spark-class")
        self._spawn("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui_port)], env)
        self._wait(lambda status: True, "the master")
        for index in range(self.workers):
            work = self.log_dir / f"worker-{index}"
            work.mkdir(parents=True, exist_ok=True)
            self._spawn(f"worker-{index}", [
                spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                "--webui-port", str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
                "--work-dir", str(work),
            ], env)
        self._wait(lambda status: int(status.get("aliveworkers", 0)) >= self.workers, f"{self.workers} workers")

    def _spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        # spark-class execs java: the PID is the JVM's.
        self._processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL))

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            dead = [p for p in self._processes if p.poll() is not None]
            if dead:
                raise ClusterStartError(f"a Spark process exited with {dead[0].returncode}; logs in {self.log_dir}")
            status = self.status()
            if status is not None and ready(status):  # type: ignore[operator]
                return
            time.sleep(0.5)
        raise ClusterStartError(f"{what} not ready within {READY_TIMEOUT:.0f} s; logs in {self.log_dir}")

    def status(self) -> dict[str, object] | None:
        """The master's status page as JSON, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as answer:
                return dict(json.load(answer))
        except OSError:
            return None

    def stop(self) -> None:
        for process in reversed(self._processes):  # workers first: they stop their executors
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()
