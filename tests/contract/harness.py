"""What the contract suite needs from a backend, beyond the public interface.

Each backend provides a Harness: it connects coordinators that behave like separate
processes, crashes one the way kill -9 would, and lets time pass until what a crashed
session held has expired. Backends add their harness fixture to BACKENDS in conftest.py.
"""

from __future__ import annotations

import abc
from typing import Any

from kubecoord import Coordinator


class Harness(abc.ABC):
    name: str
    settle: float = 10.0
    """How long a change may take to become visible to another coordinator (seconds)."""

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
    def close(self) -> None:
        """Close every coordinator this harness connected, and anything else it started."""
