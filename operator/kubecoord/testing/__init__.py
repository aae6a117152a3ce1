"""Test tooling for applications built on kubecoord: a product of its own, kept out of the
library's layers (nothing in the library imports it).

- ManualClock: pass as ``clock=`` to memory:// to make expiry deterministic.
- crash(coordinator): stop a memory coordinator as kill -9 would (no resign, no leave).
- ApiEmulator, RecordedRequest: an in-process Kubernetes API server (needs the
  ``testing`` extra): ``with ApiEmulator() as api: api.write_kubeconfig(path)``.
  Package ``kubecoord.testing.emulator``.
- ZooKeeperServer: real ZooKeeper servers (Debian's jars) on 127.0.0.1, standalone or a
  loopback ensemble. Module ``kubecoord.testing.zookeeper_server``.

The fault proxy lives in the kubecoord-testkit distribution (``kubecoord_testkit.faults``).
The emulator and the ZooKeeper server are imported lazily, so the helpers above work
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
    from kubecoord.testing.zookeeper_server import ZooKeeperServer

# public name -> the module that holds it (imported on first use)
_LAZY = {
    "ApiEmulator": "kubecoord.testing.emulator",
    "RecordedRequest": "kubecoord.testing.emulator",
    "ZooKeeperServer": "kubecoord.testing.zookeeper_server",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ApiEmulator", "ManualClock", "RecordedRequest", "ZooKeeperServer", "crash",
]
