"""Child processes for the multi-process tests: started with their own kubeconfig (their own
service-account token, so the emulator attributes their requests), their stdout collected
as JSON lines, killed and reaped by the fixture that made them."""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubecoord.testing import ApiEmulator

CHILD = pathlib.Path(__file__).with_name("child.py")


class Child:
    def __init__(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
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


class Children:
    """Every child a test starts; all killed and reaped at the end, even on failure."""

    def __init__(self, api: ApiEmulator, directory: pathlib.Path) -> None:
        self.api, self.directory = api, directory
        self.all: list[Child] = []

    def start(self, name: str, mode: str, *args: str, env: dict[str, str] | None = None) -> Child:
        token = self.api.token_for_service_account("default", name)
        config = self.api.write_kubeconfig(self.directory / f"kubeconfig-{name}", token=token)
        child = Child(name, [mode, str(config), *args], env)
        self.all.append(child)
        return child

    def close(self) -> None:
        for child in self.all:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGCONT)
            child.kill()

    def __iter__(self) -> Iterator[Child]:
        return iter(self.all)
