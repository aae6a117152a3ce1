"""KubernetesCoordinator: one API connection, one dispatcher thread, shared watches."""

from __future__ import annotations

import itertools
import threading
from typing import TypeVar

from kubecoord import validation
from kubecoord.api import Coordinator, GroupMembership, LeaderElection, ListenerRegistry, Storage
from kubecoord.backends.kubernetes import binding
from kubecoord.backends.kubernetes.context import Context, HandleBase
from kubecoord.backends.kubernetes.kv import KubeListenerRegistry, KubeStorage
from kubecoord.backends.kubernetes.leader import KubeLeaderElection
from kubecoord.backends.kubernetes.membership import KubeGroupMembership
from kubecoord.history import EventLog

_H = TypeVar("_H", bound=HandleBase)
_ids = itertools.count(1)


class KubernetesCoordinator(Coordinator):
    """A coordinator on the Kubernetes API. See kubecoord.backends.kubernetes for options."""

    backend = "kubernetes"

    def __init__(self, context: Context) -> None:
        self._context = context
        self._handles: list[HandleBase] = []
        self._delegates: dict[str, Coordinator] = {}
        self._lock = threading.Lock()
        self.id = next(_ids)

    @property
    def events(self) -> EventLog:  # type: ignore[override]
        """This coordinator's event log (the group coordinator records into it)."""
        return self._context.events

    @property
    def namespace(self) -> str:
        return self._context.namespace

    def leader_election(
        self,
        service: str,
        *,
        lease_duration: float | None = None,
        renew_deadline: float | None = None,
        retry_period: float | None = None,
    ) -> LeaderElection:
        """A LeaderElection on the Lease ``service``; timings default to the coordinator's."""
        validation.check_name(service, "service")
        bound = binding.lookup(self._context.client, binding.LEADER_ELECTIONS, service)  # binding.py
        if bound is not None and bound.backend != "kubernetes":
            return self._delegate(bound).leader_election(service)
        base = bound.election_timings(self._context.timings) if bound else self._context.timings
        timings = base.with_overrides(
            lease_duration=lease_duration, renew_deadline=renew_deadline, retry_period=retry_period
        )
        return self._track(KubeLeaderElection(self._context, service, timings))

    def group_membership(self, group: str) -> GroupMembership:
        validation.check_name(group, "group")
        bound = binding.lookup(self._context.client, binding.GROUPS, group)
        if bound is not None and bound.backend != "kubernetes":
            return self._delegate(bound).group_membership(group)
        timings = bound.group_timings(self._context.timings) if bound else self._context.timings
        return self._track(KubeGroupMembership(self._context, group, timings))

    def storage(self, name: str) -> Storage:
        validation.check_name(name, "store name")
        bound = binding.lookup(self._context.client, binding.KV_STORES, name)
        if bound is not None and bound.backend != "kubernetes":
            return self._delegate(bound).storage(name)
        return self._track(KubeStorage(self._context, name, size_limit=bound.size_limit() if bound else None))

    def _delegate(self, bound: binding.Binding) -> Coordinator:
        """The coordinator of another backend that a bound resource lives in (closed with this one)."""
        from kubecoord.connect import connect  # through the entry points: backends never import each other

        url, options = bound.zookeeper()
        with self._lock:
            existing = self._delegates.get(url)
        if existing is not None:
            return existing
        coordinator = connect(url, **options)
        with self._lock:
            existing = self._delegates.setdefault(url, coordinator)
        if existing is not coordinator:
            coordinator.close()
        return existing

    def listener_registry(self, name: str) -> ListenerRegistry:
        validation.check_name(name, "store name")
        bound = binding.lookup(self._context.client, binding.KV_STORES, name)
        if bound is not None and bound.backend != "kubernetes":
            return self._delegate(bound).listener_registry(name)
        return self._track(KubeListenerRegistry(self._context, name))

    def _track(self, handle: _H) -> _H:
        self._context.check_open()
        with self._lock:
            self._handles.append(handle)
        return handle

    def close(self) -> None:
        """Resign every candidate, leave every group (others take over at once), stop watching."""
        with self._context.lock:
            if self._context.closed or self._context.crashed:
                return
        with self._lock:
            handles = list(reversed(self._handles))
        for handle in handles:
            handle.close()  # type: ignore[attr-defined]
        with self._lock:
            delegates, self._delegates = list(self._delegates.values()), {}
        for delegate in delegates:
            delegate.close()
        with self._context.lock:
            self._context.closed = True
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
        with self._lock:
            handles = list(self._handles)
        for handle in handles:
            handle.crash()
        self._context.informers.stop_all()
        self._context.events.close()
