"""A Group's status from the namespace caches (kubernetes): its member Leases (by label)
and its coordinator record, with no handle. Blocking: a snapshot reaps expired members (a
DELETE each, over the version judged, as every membership handle reaps them), so an
expired member still goes when no client is left to notice; it says when its earliest
member expires (``recheck_in``): nothing else brings the controller back then, since
renewals are not events worth a reconcile.

Not here: Groups with ``spec.assignment`` (the operator leads their generation: a
membership handle and timers, group/assignment.py).
"""

from __future__ import annotations

from typing import Any

from kubecoord.api import Coordinator
from kubecoord.capabilities import StateCache
from kubecoord.operator.kinds.group.assignment import GroupCoordinatorView, RebalanceNotices, add_record
from kubecoord.operator.kinds.group.status import GroupStatus
from kubecoord.operator.mirror import Route, Snapshot
from kubecoord.wire import object_names
from kubecoord.wire.group_record import STATE_KEY, GroupState, decode_state, derived_name


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


def _nothing() -> None:
    """The wake of a view that lives for one step."""
