"""Capabilities some backends have beyond the interface, declared as protocols.

A backend that has one implements the protocol (and names it among its bases); a caller
asks ``isinstance(coordinator, Purgeable)`` or ``require(coordinator, Purgeable)``
instead of probing for a method by name. ``require`` raises UnsupportedFeatureError
naming the feature and the backend, as tooz does for its drivers' characteristics.

===================  ============  ===========================================================
protocol             backends      what it is for
===================  ============  ===========================================================
Purgeable            zookeeper,    delete everything one election, group or store left behind
                     cassandra,    (the operator's finalizer: znodes, rows and keys have no
                     etcd          owner references)
Crashable            every backend stop as kill -9 would, in process (kubecoord.testing.crash)
ObjectCache          kubernetes    the Leases and ConfigMaps as the coordinator's shared watch
                                   last saw them, deleted ones included (the operator's drift
                                   checks and repairs without a request per object)
StateCache           kubernetes    elections, groups and stores read from the namespace's
                     (namespace,   shared watches with no handle per object, and every change
                     managed       of their objects delivered (the operator's status of
                     scopes)       thousands of resources)
===================  ============  ===========================================================

Not guaranteed: that a capability works while the backend is unreachable (its calls raise
the interface's errors like any other).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from kubecoord.api import Coordinator, Leader
from kubecoord.errors import UnsupportedFeatureError


@runtime_checkable
class Purgeable(Protocol):
    """A coordinator that can delete what a primitive left in the backend."""

    def purge(self, primitive: str, name: str) -> int:
        """Delete every object of the ``primitive`` (kubecoord.wire.events.Primitive:
        leader_election, group or kv) called ``name``; returns how many went (0 when none)."""
        ...


@runtime_checkable
class ObjectCache(Protocol):
    """A coordinator whose shared watch keeps the Kubernetes objects it backs primitives with."""

    def observed(self, plural: str, name: str) -> dict[str, Any] | None:
        """The object (``leases`` or ``configmaps``) as the watch last saw it, without a
        request; None when it is not known that way (deleted, or not watched)."""
        ...

    def last_state(self, plural: str, name: str) -> dict[str, Any] | None:
        """As observed(), and for an object deleted since: its final state as the watch's
        DELETED event carried it, or — a deletion noticed by a re-list — the cached version
        marked with kubecoord.wire.object_names.FINAL_STATE_UNKNOWN_ANNOTATION."""
        ...


ObjectChange = Callable[[str, str, "dict[str, Any] | None", "dict[str, Any] | None"], None]
"""(plural, name, the object before or None, the object after or None when deleted)."""


@runtime_checkable
class StateCache(Protocol):
    """A coordinator whose shared namespace watches answer an observer's reads of any
    election, group or store without a handle per object, by the rules its handles read by."""

    def caches_namespace(self) -> bool:
        """Whether this coordinator's watch scope has the namespace watches (else the reads
        below raise UnsupportedFeatureError)."""
        ...

    def watch_objects(self, on_change: ObjectChange) -> Callable[[], None]:
        """Start the namespace watches (listed before this returns) and call ``on_change``
        on their thread for every change of the Leases and store ConfigMaps they hold, with
        ``plural`` ``leases`` or ``configmaps``; returns the function that stops the calls."""
        ...

    def cached_leader(self, service: str) -> Leader | None:
        """The leader of ``service`` as a handle with no candidate reads it (get_leader())."""
        ...

    def cached_members(self, group: str, *, reap: bool = False) -> tuple[dict[str, str], float | None]:
        """The live members of ``group`` (id -> data) and the seconds until the earliest of
        them expires unless renewed (None: no live member); ``reap`` first deletes the
        Leases of expired members, as every membership handle does (blocking requests)."""
        ...

    def cached_entries(self, store: str) -> dict[str, str]:
        """key -> value of every entry of ``store`` (empty when it does not exist)."""
        ...


@runtime_checkable
class Crashable(Protocol):
    """A coordinator that can stop as its process would on kill -9 (tests: kubecoord.testing.crash)."""

    def simulate_crash(self) -> None:
        """Stop without resigning, leaving or calling back: what it held expires as after a crash."""
        ...


FEATURES: dict[type, str] = {
    Crashable: "simulated crashes (use a real process and kill -9)",
    Purgeable: "purging a primitive's backend objects (purge)",
    ObjectCache: "a watch cache of its Kubernetes objects (observed, last_state)",
    StateCache: "reads from the namespace's shared watches (watch_scope namespace or managed)",
}
"""What each capability is called in an UnsupportedFeatureError."""

C = TypeVar("C")


def require(coordinator: Coordinator, capability: type[C]) -> C:
    """``coordinator`` as ``capability``; UnsupportedFeatureError (naming the feature and
    the backend) when its backend does not have it."""
    if isinstance(coordinator, capability):
        return coordinator
    raise UnsupportedFeatureError(coordinator.backend, FEATURES.get(capability, capability.__name__))
