"""What the contract suite needs from a backend, beyond the public interface.

Each backend provides a Harness: it connects coordinators that behave like separate
processes, crashes one the way kill -9 would, and lets time pass until what a crashed
session held has expired. Backends add their harness fixture to BACKENDS in conftest.py.
"""

from __future__ import annotations

import abc
import time
from typing import Any

import kubecoord
from kubecoord import Coordinator
from kubecoord.capabilities import Purgeable, require
from kubecoord.testing import crash


class Harness(abc.ABC):
    name: str
    settle: float = 10.0
    """How long a change may take to become visible to another coordinator (seconds)."""
    increments_per_thread: int = 200
    """Compare-and-set increments per thread in the lost-update test (8 threads contend)."""

    def now(self) -> float:
        """Now on the clock the coordinators judge deadlines by (leading_until, held_until)."""
        return time.monotonic()

    @abc.abstractmethod
    def connect(self, **options: Any) -> Coordinator:
        """A new coordinator, as if from a separate process, on a shared backend."""

    @abc.abstractmethod
    def crash(self, coordinator: Coordinator) -> None:
        """Stop ``coordinator`` as kill -9 would: no resign, no leave, no more renewals."""

    @abc.abstractmethod
    def expire(self) -> None:
        """Let time pass until what crashed coordinators held has expired (or is about to)."""

    @abc.abstractmethod
    def delete_store(self, name: str) -> None:
        """Delete KV store ``name`` behind its clients' backs, the way an administrator (or the
        soak) would: its backing objects go, the clients are not told."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close every coordinator this harness connected, and anything else it started."""


class UrlHarness(Harness):
    """A harness that connects to one URL with default options, crashes with
    kubecoord.testing.crash() (the coordinator's simulate_crash() hook) and closes every
    coordinator it connected. Subclasses set ``url`` and ``defaults`` and write expire()."""

    url: str
    defaults: dict[str, Any]

    def __init__(self, url: str, **defaults: Any) -> None:
        self.url = url
        self.defaults = defaults
        self.coordinators: list[Coordinator] = []

    def connect(self, **options: Any) -> Coordinator:
        coordinator = kubecoord.connect(self.url, **{**self.defaults, **options})
        self.coordinators.append(coordinator)
        return coordinator

    def crash(self, coordinator: Coordinator) -> None:
        crash(coordinator)

    def delete_store(self, name: str) -> None:
        """Purged through a coordinator of its own, for a backend that declares Purgeable
        (Cassandra, etcd); the others delete the backing objects themselves."""
        coordinator = kubecoord.connect(self.url)
        try:
            require(coordinator, Purgeable).purge("kv", name)  # type: ignore[type-abstract]  # mypy#4717
        finally:
            coordinator.close()

    def close(self) -> None:
        for coordinator in self.coordinators:
            coordinator.close()
