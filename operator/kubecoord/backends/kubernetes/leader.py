"""LeaderElection on one coordination.k8s.io/v1 Lease per service (client-go LeaseLock compatible).

The lease core's election handle (kubecoord._core.lease.election): each nominated
candidate runs an Elector over LeaseStore (lease_store.py), stepped on the process's
shared scheduler (kubecoord._core.lease.loop: a few threads, not one per elector); the
handle's one informer (a watch on the Lease by name, or a view of the namespace's shared
informer: watch_scope) feeds every elector and the listeners. Followers take over as
soon as a watch shows a release (empty holder), and after a crash as soon as the version
they observed has been unchanged for leaseDurationSeconds on their own clock. See kubecoord._core.lease.elector for the
guarantees and kubecoord._core.lease.election for what listeners are told.
"""

from __future__ import annotations

from kubecoord._core.lease import Observation, Timings
from kubecoord._core.lease.election import LeaseElection
from kubecoord._core.lease.store import RecordStore
from kubecoord.backends.kubernetes.cache import Change
from kubecoord.backends.kubernetes.client import LEASES
from kubecoord.backends.kubernetes.context import KubernetesContext, Watching
from kubecoord.backends.kubernetes.lease_store import LeaseStore, observation
from kubecoord.wire import object_names


class KubeLeaderElection(Watching, LeaseElection):
    _resource = LEASES

    def __init__(self, context: KubernetesContext, service: str, timings: Timings, *, managed: bool = False) -> None:
        # Bound to an operator-managed LeaderElection: the operator creates the Lease (and
        # re-creates a deleted one at its last epoch); a candidate that never saw it cannot
        # know that epoch, so it never creates it (its RBAC grants no create either).
        self._creates_record = not managed
        super().__init__(
            context, service, context.events, timings=timings, clock=context.clock,
            request_timeout=context.client.request_timeout,
        )
        self._init_watching(context)
        self._lease_name = object_names.election_lease_name(service)

    # -- the shared watch ---------------------------------------------------------------
    def _selector(self) -> dict[str, str]:
        return {"name": self._lease_name}

    def _on_changes(self, changes: list[Change]) -> None:
        self._changed(step=False)  # the informer's thread: wake the loops, write nothing here

    # -- lease core hooks ---------------------------------------------------------------
    def _store(self, candidate_id: str) -> LeaseStore:
        return LeaseStore(self._context, self._watching(), self._lease_name)

    def _check_store(self, store: RecordStore) -> None:
        if isinstance(store, LeaseStore) and store.fatal is not None:
            raise store.fatal  # no namespace, or refused: a clear error now, not retries forever

    def _view(self, *, start: bool) -> Observation | None:
        informer = self._watching() if start else self._informer
        observed = informer.get(self._lease_name) if informer is not None else None
        return observation(observed) if observed is not None else None

    def _notify(self, leader: str | None) -> None:
        self._context.dispatcher.notify(self._listeners, leader)

    def _stopped(self) -> bool:
        return self._context.crashed

    # -- lifecycle ----------------------------------------------------------------------
    def _stop_observing(self) -> None:
        self._stop_watching()

    def crash(self) -> None:
        self._closed = True
        self._withdraw_all(release=False)
        self._stop_watching()
