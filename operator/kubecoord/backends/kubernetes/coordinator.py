"""KubernetesCoordinator: one API connection, one dispatcher thread, shared watches."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from kubecoord._core.handles import CoordinatorBase
from kubecoord.api import Coordinator, GroupMembership, Leader, LeaderElection, ListenerRegistry, Storage
from kubecoord.backends.kubernetes import binding
from kubecoord.backends.kubernetes.context import KubernetesContext
from kubecoord.backends.kubernetes.kv import KubeListenerRegistry, KubeStorage
from kubecoord.backends.kubernetes.leader import KubeLeaderElection
from kubecoord.backends.kubernetes.membership import KubeGroupMembership
from kubecoord.backends.kubernetes.namespace_state import NamespaceState
from kubecoord.capabilities import ObjectCache, ObjectChange, StateCache
from kubecoord.history import EventLog

_ids = itertools.count(1)


class KubernetesCoordinator(CoordinatorBase, ObjectCache, StateCache):
    """A coordinator on the Kubernetes API. See kubecoord.backends.kubernetes for options."""

    backend = "kubernetes"

    def __init__(self, context: KubernetesContext) -> None:
        super().__init__(handle_owner=context)
        self._context = context
        self._delegates: dict[str, Coordinator] = {}
        self._lock = threading.Lock()
        self._state = NamespaceState(context)
        self.id = next(_ids)

    @property
    def events(self) -> EventLog:  # type: ignore[override]
        """This coordinator's event log (the group coordinator records into it)."""
        return self._context.events

    @property
    def namespace(self) -> str:
        return self._context.namespace

    def check_open(self) -> None:
        self._context.check_open()

    def _open_leader_election(self, service: str, **timings: Any) -> LeaderElection:
        """A LeaderElection on the Lease ``service``; timings (lease_duration, renew_deadline,
        retry_period) default to the coordinator's."""
        self._context.timings.with_overrides(**timings)  # bad timings refused before any request
        bound = self._lookup(binding.LEADER_ELECTIONS, service)  # binding.py
        if bound is not None and bound.backend != "kubernetes":
            return self._delegate(bound).leader_election(service)
        base = bound.election_timings(self._context.timings) if bound else self._context.timings
        return KubeLeaderElection(self._context, service, base.with_overrides(**timings), managed=bound is not None)

    def _open_group_membership(self, group: str) -> GroupMembership:
        bound = self._lookup(binding.GROUPS, group)
        if bound is not None and bound.backend != "kubernetes":
            return self._delegate(bound).group_membership(group)
        timings = bound.group_timings(self._context.timings) if bound else self._context.timings
        return KubeGroupMembership(self._context, group, timings)

    def _open_storage(self, name: str) -> Storage:
        bound = self._lookup(binding.KV_STORES, name)
        if bound is not None and bound.backend != "kubernetes":
            return self._delegate(bound).storage(name)
        return KubeStorage(self._context, name, size_limit=bound.size_limit() if bound else None)

    def _lookup(self, resource: Any, name: str) -> binding.Binding | None:
        """The resource this handle binds to (binding.py), or None with bind_resources=False."""
        if not self._context.bind_resources:
            return None
        return binding.lookup(self._context.client, resource, name)

    def observed(self, plural: str, name: str) -> dict[str, Any] | None:
        """The Lease or ConfigMap ``name`` as this coordinator's shared namespace watch last
        saw it (watch_scope namespace/managed), without a request; None when not known that
        way (kubecoord.capabilities.ObjectCache). For the operator's drift checks: a cached,
        owned object needs no GET."""
        return self._context.informers.observed(plural, name)

    def last_state(self, plural: str, name: str) -> dict[str, Any] | None:
        """As observed(), and for an object deleted since: its final state as the watch's
        DELETED event carried it. For the operator's drift repair (re-create it as it was)."""
        return self._context.informers.last_state(plural, name)

    # -- kubecoord.capabilities.StateCache: reads of the namespace watches (namespace_state.py) --
    def caches_namespace(self) -> bool:
        return self._context.informers.shares_namespace

    def watch_objects(self, on_change: ObjectChange) -> Callable[[], None]:
        self.check_open()
        return self._state.watch(on_change)

    def cached_leader(self, service: str) -> Leader | None:
        return self._state.leader(service)

    def cached_members(self, group: str, *, reap: bool = False) -> tuple[dict[str, str], float | None]:
        return self._state.members(group, reap_expired=reap)

    def cached_entries(self, store: str) -> dict[str, str]:
        return self._state.entries(store)

    def _delegate(self, bound: binding.Binding) -> Coordinator:
        """The coordinator of another backend that a bound resource lives in (closed with this one)."""
        from kubecoord.connect import connect  # through the entry points: backends never import each other

        url, options = bound.connection(self._context.client)
        key = url + "?" + repr(sorted(options.items()))
        with self._lock:
            existing = self._delegates.get(key)
        if existing is not None:
            return existing
        coordinator = connect(url, **options)
        with self._lock:
            existing = self._delegates.setdefault(key, coordinator)
        if existing is not coordinator:
            coordinator.close()
        return existing

    def _open_listener_registry(self, name: str) -> ListenerRegistry:
        bound = self._lookup(binding.KV_STORES, name)
        if bound is not None and bound.backend != "kubernetes":
            return self._delegate(bound).listener_registry(name)
        return KubeListenerRegistry(self._context, name)

    def close(self) -> None:
        """Resign every candidate, leave every group (others take over at once), stop watching."""
        with self._context.lock:
            if self._context.closed or self._context.crashed:
                return
        self._close_group_members()
        for handle in reversed(self._tracked()):
            handle.close()
        with self._lock:
            delegates, self._delegates = list(self._delegates.values()), {}
        for delegate in delegates:
            delegate.close()
        with self._context.lock:
            self._context.closed = True
        self._state.close()
        self._context.informers.stop_all()
        self._context.dispatcher.close()
        self._context.events.close()
        self._context.client.close()

    def simulate_crash(self) -> None:
        """Test hook: stop as kill -9 would — no release, no leave, no further callbacks.

        Every background thread stops renewing and watching; what this coordinator held
        (leadership, memberships) stays on the API server until it expires, exactly as
        after the death of the process. kubecoord.testing.crash() calls this.
        """
        with self._context.lock:
            self._context.check_open()
            self._context.crashed = True
        self._context.dispatcher.close(timeout=0)
        for handle in self._tracked():
            handle.crash()
        self._context.informers.stop_all()
        self._context.events.close()
