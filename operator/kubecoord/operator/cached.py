"""Status straight from the backend's shared caches: no handle per resource.

On the kubernetes backend (kubecoord.capabilities.StateCache, the watch scope the
operator connects with) every resource's status is computed from what the namespace's
one Lease watch and one ConfigMap watch hold, the way controller-runtime's reconcilers
read their informer cache: an election's Lease, a group's member Leases (by label) and
its coordinator record, a store's shards (by label). The mirrors below keep only the
previous status's counters between snapshots (a few fields); they hold no election,
membership or storage handle, no listener and no lock of the backend. The controller
maps each watch event to the resources whose ``routes`` name the object (controller-
runtime's "watch owned objects, enqueue the owner") and reconciles those.

What they read is what the handles read, by the same rules (the backend's
namespace_state.py): a leader is the record's holder unless it expired in the operator's
own observation; members are the group's Leases not expired in it, and expired ones are
reaped (deleted over the version judged) as every membership handle reaps them — so an
expired member still goes when no client is left to notice. A group's snapshot says
when its earliest member expires (``recheck_in``): nothing else brings the controller
back then, since renewals are not events worth a reconcile.

Not here: Groups with ``spec.assignment`` (the operator leads their generation: a
membership handle and timers, kubecoord.operator.assignment) and every other backend
(handles and listeners, kubecoord.operator.mirror).
"""

from __future__ import annotations

from typing import Any, ClassVar

from kubecoord.api import Coordinator, Leader
from kubecoord.capabilities import StateCache
from kubecoord.operator.assignment import GroupCoordinatorView, RebalanceNotices, add_record
from kubecoord.operator.mirror import GroupStatus, LeaderStatus, Route, Snapshot, StoreStatus
from kubecoord.wire import object_names
from kubecoord.wire.group_record import STATE_KEY, GroupState, decode_state, derived_name


def caches(coordinator: Coordinator) -> StateCache | None:
    """``coordinator`` as a StateCache whose reads work in its watch scope, else None."""
    if isinstance(coordinator, StateCache) and coordinator.caches_namespace():
        return coordinator
    return None


class CachedLeaderMirror(LeaderStatus):
    """The leader status from the election's Lease in the namespace cache."""

    blocking: ClassVar[bool] = False

    def __init__(self, cache: StateCache, name: str, previous: dict[str, Any]) -> None:
        super().__init__(previous, None)
        self._cache = cache
        self._name = name

    def routes(self) -> list[Route]:
        lease = object_names.election_lease_name(self._name)
        return [("leases", "", lease), ("leases", "", object_names.epoch_lease_name(lease))]

    def _read_leader(self) -> Leader | None:
        return self._cache.cached_leader(self._name)

    def close(self) -> None:
        """Nothing to release: the mirror holds no handle."""


class CachedGroupMirror(GroupStatus):
    """The group status from its member Leases and its coordinator record in the namespace
    caches. Blocking: a snapshot reaps expired members (a DELETE each)."""

    def __init__(self, coordinator: Coordinator, cache: StateCache, body: dict[str, Any]) -> None:
        super().__init__(dict(body.get("status") or {}), None)
        self._coordinator = coordinator
        self._cache = cache
        self._name: str = body["metadata"]["name"]
        self._rebalances = RebalanceNotices()
        self._due: float | None = None

    def routes(self) -> list[Route]:
        return [
            ("leases", object_names.GROUP_LABEL, self._name),
            ("configmaps", object_names.STORE_LABEL, derived_name(self._name)),
        ]

    def _read_members(self) -> dict[str, str]:
        members, self._due = self._cache.cached_members(self._name, reap=True)
        return members

    def _record(self) -> GroupState | None:
        text = self._cache.cached_entries(derived_name(self._name)).get(STATE_KEY)
        return decode_state(text) if text is not None else None

    def _snapshot(self) -> Snapshot:
        snapshot = super()._snapshot()
        snapshot.recheck_in = self._due
        state = self._record()
        if state is not None and state.assigned_by is not None:
            # The operator assigned this group once and spec.assignment is gone (the Group
            # was re-created without it): hand it back to its members, or nobody would ever
            # assign it again. Rare, so a view is opened for the write and closed after it.
            view = GroupCoordinatorView(self._coordinator, self._name, None, _nothing)
            try:
                state, _ = view.step()
            finally:
                view.close()
        add_record(snapshot, self._name, state, self._rebalances(state), None)
        return snapshot

    def close(self) -> None:
        """Nothing to release: the mirror holds no handle."""


class CachedStoreMirror(StoreStatus):
    """The store status from its shards' ConfigMaps in the namespace cache."""

    blocking: ClassVar[bool] = False

    def __init__(self, cache: StateCache, name: str, limit: int, previous: dict[str, Any]) -> None:
        super().__init__(limit, previous, None)
        self._cache = cache
        self._name = name

    def routes(self) -> list[Route]:
        return [("configmaps", object_names.STORE_LABEL, self._name)]

    def _read_values(self) -> dict[str, str]:
        return self._cache.cached_entries(self._name)

    def close(self) -> None:
        """Nothing to release: the mirror holds no handle."""


def _nothing() -> None:
    """The wake of a view that lives for one step."""
