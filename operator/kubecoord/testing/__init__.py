"""Test tooling for applications built on kubecoord: a product of its own, kept out of the
library's layers (nothing in the library imports it).

- ManualClock: pass as ``clock=`` to memory:// to make expiry deterministic.
- crash(coordinator): stop a memory coordinator as kill -9 would (no resign, no leave).
- ApiEmulator, RecordedRequest: an in-process Kubernetes API server (needs the
  ``testing`` extra): ``with ApiEmulator() as api: api.write_kubeconfig(path)``.
  Package ``kubecoord.testing.emulator``.

The fault proxy and the ZooKeeper server starter live in the kubecoord-testkit
distribution (``kubecoord_testkit.faults``, ``kubecoord_testkit.servers.zookeeper``).
The emulator is imported lazily, so the helpers above work
without aiohttp.
"""

from __future__ import annotations

import importlib
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
    from kubecoord.testing.emulator import ApiEmulator, RecordedRequest

# public name -> the module that holds it (imported on first use)
_LAZY = {
    "ApiEmulator": "kubecoord.testing.emulator",
    "RecordedRequest": "kubecoord.testing.emulator",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ApiEmulator", "ManualClock", "RecordedRequest", "crash",
]
