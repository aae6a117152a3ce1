"""Elections, groups and stores read straight from the shared namespace informers, with no
handle per object (kubecoord.capabilities.StateCache).

An observer of thousands of primitives — the operator mirroring every resource into its
status — needs no elector, membership loop or store handle per object: it needs what the
namespace's one Lease watch and one ConfigMap watch already hold, read by the same rules
as the handles read them (controller-runtime's reconcilers read their cache the same way):

- a leader is ``observed_leader`` of the lease core (the holder, unless the record expired
  in this process's observation), as a handle with no candidate reads it;
- members are ``judge_members`` of membership.py (the one expiry rule over each member
  Lease's latest observation) and expired members are reaped by ``reap``, exactly as
  every membership handle reaps them;
- a store's entries are its shards' ConfigMaps (shard 0 records the count), decoded by
  kubecoord.wire.kv_entries.

Changes are delivered to subscribers of ``watch`` as (plural, name, old, new) on the
informers' thread, every change of every watched Lease and store ConfigMap: the caller
maps them to what it owns (controller-runtime's mapping of an owned object to its owner).

Guarantees: the informers are listed before ``watch`` returns, so a read after it sees
at least the list's state. Only the ``namespace`` and ``managed`` watch scopes have
namespace informers; in the ``object`` scope every call raises
UnsupportedFeatureError. Not guaranteed: that a read sees a change the watch has not
delivered yet (a handle's reads have the same limit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kubecoord._core.lease.election import observed_leader
from kubecoord.api import Leader
from kubecoord.backends.kubernetes.cache import Change
from kubecoord.backends.kubernetes.client import CONFIGMAPS, LEASES, Resource
from kubecoord.backends.kubernetes.context import KubernetesContext
from kubecoord.backends.kubernetes.lease_store import observation
from kubecoord.backends.kubernetes.membership import judge_members, reap
from kubecoord.backends.kubernetes.shared_informer import Informer
from kubecoord.capabilities import ObjectChange
from kubecoord.errors import UnsupportedFeatureError
from kubecoord.wire import object_names
from kubecoord.wire.kv_entries import load_entries
from kubecoord.wire.kv_shards import recorded_shards

REAP_RETRY_SECONDS = 1.0
"""How soon to judge again an expired member whose deletion got no answer."""


class NamespaceState:
    """The reads of kubecoord.capabilities.StateCache over one coordinator's namespace informers."""

    def __init__(self, context: KubernetesContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._informers: dict[str, Informer] = {}
        self._subscribers: list[tuple[ObjectChange, dict[str, Callable[[list[Change]], None]]]] = []

    def _informer(self, resource: Resource) -> Informer:
        """The started namespace informer of ``resource`` (listed on first use), held until close."""
        with self._lock:
            informer = self._informers.get(resource.plural)
        if informer is not None:
            return informer
        acquired = self._context.informers.acquire_namespace(resource)
        if acquired is None:
            raise UnsupportedFeatureError(
                "kubernetes", "reads from the namespace's shared watches (watch_scope namespace or managed)"
            )
        try:
            acquired.start()
        except BaseException:
            self._context.informers.release(acquired)
            raise
        with self._lock:
            informer = self._informers.setdefault(resource.plural, acquired)
        if informer is not acquired:
            self._context.informers.release(acquired)  # another thread got there first
        return informer

    # -- changes ----------------------------------------------------------------------------
    def watch(self, on_change: ObjectChange) -> Callable[[], None]:
        """Call ``on_change`` for every change of the namespace's Leases and store ConfigMaps
        (on the informers' thread: quick, no blocking calls); returns the unsubscribe."""
        routes: dict[str, Callable[[list[Change]], None]] = {}
        for resource in (LEASES, CONFIGMAPS):
            informer = self._informer(resource)

            def deliver(changes: list[Change], plural: str = resource.plural) -> None:
                for name, old, new in changes:
                    on_change(plural, name, old.obj if old is not None else None, new.obj if new is not None else None)

            informer.subscribe(deliver)
            routes[resource.plural] = deliver
        with self._lock:
            self._subscribers.append((on_change, routes))

        def unsubscribe() -> None:
            with self._lock:
                if (on_change, routes) not in self._subscribers:
                    return
                self._subscribers.remove((on_change, routes))
                informers = dict(self._informers)
            for plural, deliver in routes.items():
                informers[plural].unsubscribe(deliver)

        return unsubscribe

    # -- reads --------------------------------------------------------------------------------
    def leader(self, service: str) -> Leader | None:
        observed = self._informer(LEASES).get(object_names.election_lease_name(service))
        return observed_leader(observation(observed) if observed is not None else None, self._context.clock.now())

    def members(self, group: str, *, reap_expired: bool = False) -> tuple[dict[str, str], float | None]:
        """(member id -> data of the live members, seconds until the earliest of them expires
        unless renewed, or None); with ``reap_expired``, delete the expired members' Leases
        first (over the version judged: a renewal meanwhile wins)."""
        informer = self._informer(LEASES)
        judged = judge_members(informer.labelled(object_names.GROUP_LABEL, group), group, self._context.clock.now())
        if reap_expired and judged.expired:
            for name, observed, _member in judged.expired:
                reap(self._context, informer, name, observed, group)
            judged = judge_members(
                informer.labelled(object_names.GROUP_LABEL, group), group, self._context.clock.now()
            )
        due = None if judged.next_expiry is None else max(0.0, judged.next_expiry - self._context.clock.now())
        if reap_expired and judged.expired:  # the server gave no answer: judge them again soon
            due = min(due if due is not None else REAP_RETRY_SECONDS, REAP_RETRY_SECONDS)
        return judged.live, due

    def entries(self, store: str) -> dict[str, str]:
        """key -> value of every entry of ``store`` (empty when it does not exist)."""
        informer = self._informer(CONFIGMAPS)
        shard_zero = informer.get(object_names.store_shard_name(store, 0))
        if shard_zero is None:
            return {}
        values: dict[str, str] = {}
        for index in range(recorded_shards(shard_zero.obj)):
            shard = shard_zero if index == 0 else informer.get(object_names.store_shard_name(store, index))
            if shard is not None:
                values.update((key, entry.value) for key, entry in load_entries(shard.obj.get("data")).items())
        return values

    def close(self) -> None:
        with self._lock:
            informers, self._informers = list(self._informers.values()), {}
            subscribers, self._subscribers = self._subscribers, []
        for _, routes in subscribers:
            for informer in informers:
                for deliver in routes.values():
                    informer.unsubscribe(deliver)
        for informer in informers:
            self._context.informers.release(informer)
