"""A Spark standalone cluster on 127.0.0.1 from the pyspark installation: one master and
N workers, for the tests and the benchmark (and for trying the cluster path locally).

Usage::

    with StandaloneCluster(workers=2, cores=1, memory="1g") as cluster:
        subprocess.run(["kubecoord", "analyze", "logs", "--out", "out", "--master", cluster.url, ...])

Every process binds 127.0.0.1 on a free port, is waited for with a readiness check (the
master's JSON status page says ALIVE, then lists every worker alive with all its cores
and memory), and is stopped and wait()ed on exit, workers first (a worker stops and
reaps its executors). A start that fails is reported with the tail of the logs of the
process that failed. Logs go to ``log_dir``.
Not guaranteed: a port taken between choosing it and binding it (the master then exits
and the start fails: retry).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from kubecoord.analytics.session import FAST_START_JVM_OPTIONS, LOG4J2
from kubecoord.errors import CoordinationError
from kubecoord_testkit import processes
from kubecoord_testkit.servers.managed import ManagedServers, free_port, wait_ready

READY_TIMEOUT = 240.0
"""Generous: each JVM starts in seconds on a quiet machine, many times that at load 20."""
STOP_TIMEOUT = 20.0
LOG_TAIL = 20


class ClusterStartError(CoordinationError):
    """The master or a worker did not come up in time."""


def spark_home() -> Path:
    """The pyspark package directory: it ships bin/spark-class and the jars."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterStartError("pyspark is not installed")
    return Path(spec.origin).parent


class StandaloneCluster(ManagedServers):
    def __init__(self, *, workers: int = 2, cores: int = 1, memory: str = "1g", log_dir: Path | None = None) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="kubecoord-spark-standalone-"))
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self._processes: list[subprocess.Popen[bytes]] = []
        self._names: list[str] = []
        self._logs: list[IO[bytes]] = []

    def start(self) -> None:
        home = spark_home()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            # The daemons only schedule and relay: the fast-starting JVM settings suit them.
            "SPARK_DAEMON_JAVA_OPTS": f"-Dlog4j2.configurationFile=file:{LOG4J2} {FAST_START_JVM_OPTIONS}",
        }
        spark_class = str(home / "bin" / "spark-class")
        self._spawn("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui_port)], env)
        self._wait(lambda status: status.get("status") == "ALIVE", "the master")
        for index in range(self.workers):
            work = self.log_dir / f"worker-{index}"
            work.mkdir(parents=True, exist_ok=True)
            self._spawn(f"worker-{index}", [
                spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                "--webui-port", str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
                "--work-dir", str(work),
            ], env)
        self._wait(self._workers_ready, f"{self.workers} workers")

    def _workers_ready(self, status: dict[str, Any]) -> bool:
        """Every worker registered ALIVE with all its cores free: an application started
        now gets the whole cluster at once."""
        alive = [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]
        return len(alive) >= self.workers and sum(int(w.get("coresfree", 0)) for w in alive) >= (
            self.workers * self.cores)

    def _spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        self._names.append(name)
        # spark-class execs java: the PID is the JVM's.
        self._processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL))

    def _wait(self, ready: Callable[[dict[str, Any]], bool], what: str) -> None:
        def answered() -> bool:
            status = self.status()
            return status is not None and ready(status)

        wait_ready(answered, what=what, timeout=READY_TIMEOUT, gone=self._gone, fail=self._failure, interval=0.5)

    def _gone(self) -> str | None:
        for name, process in zip(self._names, self._processes, strict=True):
            if process.poll() is not None:
                return f"{name} exited with {process.returncode}"
        return None

    def _failure(self, message: str) -> ClusterStartError:
        tails = []
        for name in self._names:
            lines = (self.log_dir / f"{name}.log").read_text(errors="replace").splitlines()[-LOG_TAIL:]
            tails.append(f"--- {name}.log (last {len(lines)} lines)\n" + "\n".join(lines))
        return ClusterStartError(f"{message}; logs in {self.log_dir}\n" + "\n".join(tails))

    def status(self) -> dict[str, object] | None:
        """The master's status page as JSON, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as answer:
                return dict(json.load(answer))
        except OSError:
            return None

    def stop(self) -> None:
        for process in reversed(self._processes):  # workers first: they stop their executors
            processes.stop(process, STOP_TIMEOUT)
        self._processes.clear()
        self._names.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()
