"""LeaderElection on one coordination.k8s.io/v1 Lease per service (client-go LeaseLock compatible).

Each nominated candidate runs the lease core's Elector (kubecoord._core.lease) on its own
thread over LeaseStore (lease_store.py); the
handle's one informer (a watch on the Lease by name) feeds every elector and the
listeners. Followers take over as soon as a watch shows a release (empty holder), and
after a crash as soon as the version they observed has been unchanged for
leaseDurationSeconds on their own clock. See kubecoord._core.lease.elector for the guarantees.

Listeners get the leader as this handle sees it: one of its own candidates while its
renew deadline holds, else the Lease's holder — except that a holder which is one of this
handle's own candidates but no longer leads in its own view reads as None (the holder
knows first that it lost). Not guaranteed: a None when a Lease merely expires with no
candidate left to take it (get_leader() does return None then).
"""

from __future__ import annotations

import threading
from typing import Any

from kubecoord._core.handles import ElectionHandle
from kubecoord._core.lease import Elector, Loop, Observation, Timings, expires_at
from kubecoord.api import Leader
from kubecoord.backends.kubernetes import naming
from kubecoord.backends.kubernetes.client import LEASES
from kubecoord.backends.kubernetes.context import Context, WatchingHandle
from kubecoord.backends.kubernetes.lease_record import record_from_lease
from kubecoord.backends.kubernetes.lease_store import LeaseStore
from kubecoord.backends.kubernetes.watch import Change
from kubecoord.errors import MemberExistsError

_UNSET: Any = object()


class KubeLeaderElection(WatchingHandle, ElectionHandle):
    _resource = LEASES

    def __init__(self, context: Context, service: str, timings: Timings) -> None:
        super().__init__(context, service)
        self.service = service
        self.timings = timings
        self._lease_name = naming.election_lease_name(service)
        self._lock = threading.Lock()  # electors and the reported leader; a leaf lock
        self._electors: dict[str, Elector] = {}
        self._loops: dict[str, Loop] = {}
        self._reported: str | None = _UNSET

    # -- the shared watch ---------------------------------------------------------------
    def _selector(self) -> dict[str, str]:
        return {"name": self._lease_name}

    def _on_changes(self, changes: list[Change]) -> None:
        with self._lock:
            loops = list(self._loops.values())
        for loop in loops:
            loop.wake()
        self._report()

    def _on_elector_change(self, elector: Elector, leading: bool) -> None:
        self._report()

    def _report(self) -> None:
        """Tell listeners when the leader as this handle sees it changed (module docstring)."""
        with self._lock:
            if self._closed:
                return
            leading = [c for c, e in self._electors.items() if e.is_leader()]
            epoch = None
            if leading:
                current: str | None = leading[0]
            else:
                observed = self._informer.get(self._lease_name) if self._informer is not None else None
                record = record_from_lease(observed.obj) if observed is not None else None
                holder = record.holder if record is not None else ""
                current = None if not holder or holder in self._electors else holder
                epoch = record.transitions if record is not None else None
            if current == self._reported:
                return
            self._reported = current
            self._context.dispatcher.notify(self._listeners, current)
        if current is not None and not leading:
            self._record("observed", member=current, epoch=epoch)

    # -- the interface ------------------------------------------------------------------
    def _nominate(self, candidate_id: str, data: str) -> bool:
        with self._lock:
            if candidate_id in self._electors:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
        store = LeaseStore(self._context, self._watching(), self._lease_name)
        elector = Elector(
            service=self.service, candidate=candidate_id, data=data, store=store, timings=self.timings,
            clock=self._context.clock, on_change=self._on_elector_change, events=self._context.events,
            request_timeout=self._context.client.request_timeout, backend="kubernetes",
        )
        loop = Loop(f"kubecoord-elector-{self.service}-{candidate_id}", elector.step, lock=elector.step_lock)
        with self._lock:
            if candidate_id in self._electors:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
            self._electors[candidate_id] = elector
            self._loops[candidate_id] = loop
        with elector.step_lock:
            elector.step()  # the first attempt in the caller's thread: nominate() answers it
        if store.fatal is not None:  # no namespace: a clear error now, not retries forever
            with self._lock:
                self._electors.pop(candidate_id, None)
                self._loops.pop(candidate_id, None)
            raise store.fatal
        loop.start()
        return elector.is_leader()

    def _get_leader(self) -> Leader | None:
        observed = self._watching().get(self._lease_name)
        if observed is None:
            return None
        record = record_from_lease(observed.obj)
        if not record.holder:
            return None
        with self._lock:
            mine = self._electors.get(record.holder)
        if mine is not None and not mine.is_leader():
            return None
        seen = Observation(record, observed.version, observed.seen_at)
        if mine is None and self._context.clock.now() >= expires_at(seen):
            return None  # expired in our own observation; whoever takes over will show up
        return Leader(record.holder, record.data, record.transitions)

    def _resign(self, candidate_id: str) -> None:
        with self._lock:
            elector = self._electors.get(candidate_id)
        if elector is None or not elector.is_leader():
            return
        self._withdraw(candidate_id)
        self._report()

    def _withdraw(self, candidate_id: str, *, release: bool = True) -> None:
        with self._lock:
            elector = self._electors.get(candidate_id)
            loop = self._loops.pop(candidate_id, None)
        if loop is not None:
            loop.stop()
        if elector is not None:
            with elector.step_lock:
                if release:
                    elector.release()
                else:
                    elector.abandon()
        with self._lock:
            self._electors.pop(candidate_id, None)

    def is_leader(self, candidate_id: str | None = None) -> bool:
        if self._closed or self._context.crashed:
            return False
        with self._lock:
            electors = list(self._electors.items())
        return any(e.is_leader() for c, e in electors if candidate_id is None or c == candidate_id)

    def _listener_added(self, first: bool) -> None:
        if not self._closed and not self._context.crashed:
            self._watching()

    def close(self) -> None:
        if self._closed:
            return
        for candidate_id in list(self._electors):
            self._withdraw(candidate_id)
        self._report()
        self._closed = True
        self._stop_watching()

    def crash(self) -> None:
        self._closed = True
        for candidate_id in list(self._electors):
            self._withdraw(candidate_id, release=False)
        self._stop_watching()
