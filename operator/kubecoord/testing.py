"""Helpers for testing applications built on kubecoord.

- ManualClock: pass as ``clock=`` to memory:// to make expiry deterministic.
- crash(coordinator): stop a memory coordinator as kill -9 would (no resign, no leave).

The Kubernetes API emulator is added here by the Kubernetes backend.
"""

from __future__ import annotations

from kubecoord._internal.clock import ManualClock
from kubecoord.api import Coordinator
from kubecoord.errors import UnsupportedFeatureError


def crash(coordinator: Coordinator) -> None:
    """Simulate the death of the process holding ``coordinator`` (memory backend)."""
    simulate = getattr(coordinator, "simulate_crash", None)
    if simulate is None:
        raise UnsupportedFeatureError(coordinator.backend, "simulated crashes (use a real process and kill -9)")
    simulate()


__all__ = ["ManualClock", "crash"]
