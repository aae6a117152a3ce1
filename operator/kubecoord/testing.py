"""What applications built on kubecoord import in their own tests, as ``kopf.testing``
offers kopf's users: a few helpers over the memory backend, nothing that starts a server.

- ManualClock: pass as ``clock=`` to memory:// to make expiry deterministic.
- crash(coordinator): stop a memory coordinator as kill -9 would (no resign, no leave).
- forget(url): drop memory://NAME's shared state once its coordinators are closed (a test
  that makes a NAME per example would otherwise keep every example's state until exit).

Servers and fault injectors (the Kubernetes API emulator, real ZooKeeper and
kube-apiserver starters, the TCP fault proxy) and their pytest fixtures are the
kubecoord-testkit distribution (``kubecoord_testkit``). Nothing in the library imports
this module.
"""

from __future__ import annotations

from kubecoord._internal.clock import ManualClock
from kubecoord.api import Coordinator
from kubecoord.backends.memory import state
from kubecoord.capabilities import FEATURES, Crashable
from kubecoord.connect import parse_url
from kubecoord.errors import InvalidArgumentError, UnsupportedFeatureError


def crash(coordinator: Coordinator) -> None:
    """Simulate the death of the process holding ``coordinator``; UnsupportedFeatureError
    for a backend that cannot (kubecoord.capabilities.Crashable)."""
    if not isinstance(coordinator, Crashable):
        raise UnsupportedFeatureError(coordinator.backend, FEATURES[Crashable])
    coordinator.simulate_crash()


def forget(url: str) -> None:
    """Drop the shared state of ``url`` (memory://NAME): the next connect to NAME starts
    empty. Close its coordinators first; one still open keeps the old state to itself."""
    parsed = parse_url(url)
    if parsed.scheme != "memory":
        raise InvalidArgumentError(f"forget() takes a memory:// URL, not {url!r}")
    state.forget(parsed)


__all__ = ["ManualClock", "crash", "forget"]
