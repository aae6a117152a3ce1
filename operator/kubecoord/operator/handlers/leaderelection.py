"""LeaderElection: the Lease (kubernetes) or the election znodes (zookeeper) of one service.

Status: leader, leaderData, epoch, leaderSince and (kubernetes backend) renewTime; Events
LeaderElected / LeaderLost; the operator's event log gets an ``observed`` event per change
of leader. renewTime is the Lease's as of the last change of leader: the status is
written on changes, not on every renewal, so the operator's write rate does not grow
with renewals (the Lease itself has the live renewTime).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.capabilities import ObjectCache, StateCache
from kubecoord.operator import metrics
from kubecoord.operator.cached import CachedLeaderMirror, caches
from kubecoord.operator.handlers._resource import History, LiveResource, register
from kubecoord.operator.mirror import LeaderMirror, LeaderStatus, Mirror, Snapshot
from kubecoord.wire import object_names
from kubecoord.wire.events import Event, Primitive


class _RenewTime(LeaderStatus):
    """The leader status plus renewTime, read from the operator's Lease cache (no request)."""

    def _init_renew_time(self, coordinator: Coordinator, body: dict[str, Any]) -> None:
        # The kubernetes backend's watch cache (kubecoord.capabilities.ObjectCache), if any.
        self._observed = coordinator.observed if isinstance(coordinator, ObjectCache) else None
        self._lease = object_names.election_lease_name(body["metadata"]["name"])
        self._renew_time: str | None = (body.get("status") or {}).get("renewTime")

    def _snapshot(self) -> Snapshot:
        snapshot = super()._snapshot()
        if self._observed is not None and snapshot.notices:
            lease = self._observed("leases", self._lease) if snapshot.status.get("leader") else None
            self._renew_time = ((lease or {}).get("spec") or {}).get("renewTime")
        if self._observed is not None:
            snapshot.status["renewTime"] = self._renew_time
        return snapshot


class _LeaseMirror(_RenewTime, LeaderMirror):
    """Through an election handle (every backend)."""

    def __init__(self, coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> None:
        super().__init__(coordinator, body["metadata"]["name"], dict(body.get("status") or {}), wake)
        self._init_renew_time(coordinator, body)


class _CachedLeaseMirror(_RenewTime, CachedLeaderMirror):
    """From the namespace's Lease cache, no handle (kubernetes)."""

    def __init__(self, coordinator: Coordinator, cache: StateCache, body: dict[str, Any]) -> None:
        super().__init__(cache, body["metadata"]["name"], dict(body.get("status") or {}))
        self._init_renew_time(coordinator, body)


def _mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    cache = caches(coordinator)
    if cache is not None:
        return _CachedLeaseMirror(coordinator, cache, body)
    return _LeaseMirror(coordinator, body, wake)


async def _after(resource: LiveResource, snapshot: Snapshot) -> None:
    lease_seconds = float((resource.body.get("spec") or {}).get("leaseDurationSeconds", 15))
    metrics.leader_presence(resource.namespace, resource.name, present=bool(snapshot.status.get("leader")),
                            lease_seconds=lease_seconds)
    for notice in snapshot.notices:
        metrics.LEADER_CHANGES.labels(resource.namespace, resource.name).inc()
        History.record(
            resource.backend,
            resource.namespace,
            primitive=Primitive.LEADER_ELECTION,
            name=resource.name,
            event=Event.OBSERVED,
            member=snapshot.status.get("leader"),
            epoch=snapshot.status.get("epoch"),
            reason=notice.reason,
        )


register("leaderelections", _mirror, _after)
