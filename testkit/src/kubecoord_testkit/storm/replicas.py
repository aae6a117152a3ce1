"""The storm's two operator replicas, each behind a fault proxy of its own.

A replica *slot* (``a``, ``b``) is one pod of the chart's Deployment: a ``kubecoord
operator`` process with a token of the chart's ServiceAccount, started as the chart's
Deployment runs it (``--fence-writes`` when the chart fences, ``--confinement-policy`` and
``--confinement-binding``), under kubecoord_testkit.operator_freeze so that the driver can freeze it between
its fencing check and a write's send. Every start is a new *generation* with identity
``SLOT-N``: the judge tells the terms apart by identity (a pod restarted by its
Deployment gets a new name too). The slot's proxy sits between the process and the API
server: ``hold()`` stalls its connections both ways (the API connection held past the
lease), ``set_upstream`` follows a restarted API server.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from dataclasses import dataclass

from kubecoord_testkit import operator_freeze, processes
from kubecoord_testkit.faults.proxy import ThreadedFaultProxy
from kubecoord_testkit.servers.managed import free_port

FREEZE_ANY_WRITE = "^(POST|PUT|PATCH|DELETE) "


@dataclass(frozen=True)
class ReplicaConfig:
    namespace: str
    """The watched namespace."""
    lease_namespace: str
    lease: str
    timings: tuple[float, float, float]
    """The operator Lease's duration, renew deadline and retry period."""
    fenced: bool
    confinement_policy: str | None
    confinement_binding: str | None


class Replica:
    def __init__(self, slot: str, config: ReplicaConfig, folder: pathlib.Path, upstream: tuple[str, int]) -> None:
        self.slot, self.config, self.folder = slot, config, folder
        self.proxy = ThreadedFaultProxy(upstream).start()
        self.generation = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.identity = ""
        self.kubeconfig = pathlib.Path()
        self.frozen = False

    @property
    def arm(self) -> pathlib.Path:
        return self.folder / f"{self.slot}.arm"

    def mark(self, identity: str | None = None) -> pathlib.Path:
        return self.folder / f"{identity or self.identity}.frozen"

    def start(self, kubeconfig: pathlib.Path) -> str:
        """A new generation with ``kubeconfig`` (the chart ServiceAccount's token, the proxy
        as its server); returns its identity."""
        self.generation += 1
        self.identity = f"{self.slot}-{self.generation}"
        self.kubeconfig = kubeconfig
        self.arm.unlink(missing_ok=True)
        self.frozen = False
        timings = self.config.timings
        flags = ["--fence-writes"] if self.config.fenced else []
        if self.config.confinement_policy:
            flags += ["--confinement-policy", self.config.confinement_policy]
        if self.config.confinement_binding:
            flags += ["--confinement-binding", self.config.confinement_binding]
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), operator_freeze.PATTERN: FREEZE_ANY_WRITE,
               operator_freeze.MARK: str(self.mark()), operator_freeze.ARM: str(self.arm)}
        with open(self.folder / f"{self.identity}.log", "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kubecoord_testkit.operator_freeze", "--log-level", "INFO", "operator",
                 "--namespace", self.config.namespace, "--kubeconfig", str(kubeconfig),
                 "--lease-namespace", self.config.lease_namespace, "--lease-name", self.config.lease,
                 "--identity", self.identity, "--lease-duration", str(timings[0]),
                 "--renew-deadline", str(timings[1]), "--retry-period", str(timings[2]),
                 "--health-port", str(free_port()), "--metrics-port", "0", "--bind", "127.0.0.1", *flags],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        return self.identity

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def freeze(self) -> None:
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGSTOP)
            self.frozen = True

    def thaw(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def stop(self) -> None:
        self.thaw()
        self.arm.unlink(missing_ok=True)
        if self.process is not None:
            processes.stop(self.process, 30)
            self.process = None

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.proxy.close()

    def log_text(self, identity: str | None = None) -> str:
        path = self.folder / f"{identity or self.identity}.log"
        return path.read_text(errors="replace") if path.exists() else ""
