"""Helpers for testing applications built on kubecoord.

- ManualClock: pass as ``clock=`` to memory:// to make expiry deterministic.
- crash(coordinator): stop a memory coordinator as kill -9 would (no resign, no leave).

- ApiEmulator: an in-process Kubernetes API server (needs the ``testing`` extra):
  ``with ApiEmulator() as api: api.write_kubeconfig(path)``. Imported lazily, so the
  helpers above work without aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubecoord._internal.clock import ManualClock
from kubecoord.api import Coordinator
from kubecoord.errors import UnsupportedFeatureError


def crash(coordinator: Coordinator) -> None:
    """Simulate the death of the process holding ``coordinator`` (memory backend)."""
    simulate = getattr(coordinator, "simulate_crash", None)
    if simulate is None:
        raise UnsupportedFeatureError(coordinator.backend, "simulated crashes (use a real process and kill -9)")
    simulate()


if TYPE_CHECKING:
    from kubecoord._emulator import ApiEmulator, RecordedRequest


def __getattr__(name: str) -> Any:
    if name in ("ApiEmulator", "RecordedRequest"):
        from kubecoord import _emulator

        return getattr(_emulator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ApiEmulator", "ManualClock", "RecordedRequest", "crash"]
