"""Child processes for the multi-process tests: started with their own kubeconfig (their own
service-account token, so the server attributes their requests), their stdout collected
as JSON lines, killed and reaped by the fixture that made them. They run against either
API server of tests/backends/kubernetes/clusters.py."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .clusters import Cluster

CHILD = pathlib.Path(__file__).with_name("child.py")


class Child:
    """A process printing JSON lines: child.py by default, any program with ``argv``."""

    def __init__(self, name: str, args: list[str], env: dict[str, str] | None = None,
                 argv: list[str] | None = None, stderr: pathlib.Path | None = None) -> None:
        self.name = name
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self.stderr = stderr
        with open(stderr, "wb") if stderr is not None else open(os.devnull, "wb") as sink:
            self.process = subprocess.Popen(
                argv or [sys.executable, str(CHILD), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=sink, env=env,
            )
        self.killed_at: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = json.loads(raw)
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], *, start: int = 0, timeout: float = 30) -> int:
        """Index of the first line from ``start`` on that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index in range(start, len(self.lines)):
                    if predicate(self.lines[index]):
                        return index
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"{self.name}: no such line; got {self.lines[start:]!r}")
                self._cond.wait(min(remaining, 0.2))

    def leading(self) -> bool:
        with self._cond:
            flags = [line["value"] for line in self.lines if line["event"] == "is_leader"]
        return bool(flags) and flags[-1] is True

    def kill(self) -> None:
        if self.process.poll() is None:
            self.killed_at = time.time()
            self.process.kill()
        self.process.wait()
        self._reader.join(5)

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def send_line(self, text: str = "") -> None:
        """One line on the child's stdin (``interrupted`` waits for one)."""
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode() + b"\n")
        self.process.stdin.flush()


class Children:
    """Every child a test starts; all killed and reaped at the end, even on failure."""

    def __init__(self, cluster: Cluster, directory: pathlib.Path) -> None:
        self.cluster, self.directory = cluster, directory
        self.all: list[Child] = []

    def kubeconfig(self, name: str) -> pathlib.Path:
        """The kubeconfig of ServiceAccount ``name`` (the child's identity on the server)."""
        return self.cluster.service_account_kubeconfig(name, self.directory)

    def start(self, name: str, mode: str, *args: str, env: dict[str, str] | None = None,
              kubeconfig: pathlib.Path | None = None) -> Child:
        config = kubeconfig or self.kubeconfig(name)
        environment = {**(env if env is not None else os.environ), "KUBECOORD_URL": self.cluster.url}
        child = Child(name, [mode, str(config), *args], environment)
        self.all.append(child)
        return child

    def start_client_go(self, binary: pathlib.Path, name: str, lease: str, *timings: str) -> Child:
        """client-go's LeaseLock candidate (le-candidate) as ServiceAccount ``name``; its klog
        output goes to ``NAME.stderr`` in the test's directory."""
        argv = [str(binary), "--kubeconfig", str(self.kubeconfig(name)), "--namespace", self.cluster.namespace,
                "--lease", lease, "--id", name, *timings]
        child = Child(name, [], None, argv=argv, stderr=self.directory / f"{name}.stderr")
        self.all.append(child)
        return child

    def close(self) -> None:
        for child in self.all:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGCONT)
            child.kill()

    def __iter__(self) -> Iterator[Child]:
        return iter(self.all)
