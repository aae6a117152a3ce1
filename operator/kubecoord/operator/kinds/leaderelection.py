"""LeaderElection: the Lease (kubernetes) or the election znodes (zookeeper) of one service.

Status: leader, leaderData, epoch, leaderSince and (kubernetes backend) renewTime; Events
LeaderElected / LeaderLost; the operator's event log gets an ``observed`` event per change
of leader. renewTime is the Lease's as of the last change of leader: the status is
written on changes, not on every renewal, so the operator's write rate does not grow
with renewals (the Lease itself has the live renewTime).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

from kubecoord.api import Coordinator, Leader
from kubecoord.capabilities import ObjectCache, StateCache
from kubecoord.operator import metrics
from kubecoord.operator.controller.reconciler import LiveResource
from kubecoord.operator.kinds.history import History
from kubecoord.operator.mirror import Mirror, Notice, Route, Snapshot, caches, now_rfc3339
from kubecoord.timings import DEFAULT_LEASE_DURATION
from kubecoord.wire import object_names
from kubecoord.wire.events import Event, Primitive


class LeaderStatus(Mirror):
    """status.leader, leaderData, epoch and leaderSince of one election, from ``_read_leader``."""

    def __init__(self, previous: dict[str, Any], wake: Callable[[], None] | None) -> None:
        super().__init__(wake)
        self._leader: str | None = previous.get("leader")
        self._epoch: int | None = previous.get("epoch")
        self._since: str | None = previous.get("leaderSince")

    @abc.abstractmethod
    def _read_leader(self) -> Leader | None: ...

    def _snapshot(self) -> Snapshot:
        leader = self._read_leader()
        notices: list[Notice] = []
        leader_id = leader.id if leader else None
        epoch = leader.epoch if leader else self._epoch
        if leader_id != self._leader or (leader is not None and leader.epoch != self._epoch):
            self._since = now_rfc3339() if leader else None
            if leader is not None:
                notices.append(Notice("Normal", "LeaderElected", f"{leader.id} leads with epoch {leader.epoch}"))
            else:
                notices.append(Notice("Normal", "LeaderLost", f"{self._leader} no longer leads; no leader"))
        self._leader, self._epoch = leader_id, epoch
        status: dict[str, Any] = {
            "leader": leader_id,
            "leaderData": leader.data if leader else None,
            "epoch": epoch,
            "leaderSince": self._since,
        }
        return Snapshot(status, notices)


class LeaderMirror(LeaderStatus):
    """The leader status through an election handle and its listener."""

    def __init__(self, coord: Coordinator, name: str, previous: dict[str, Any], wake: Callable[[], None]) -> None:
        super().__init__(previous, wake)
        self._election = coord.leader_election(name)
        self._election.add_listener(self._on_change)

    def _read_leader(self) -> Leader | None:
        return self._election.get_leader()

    def close(self) -> None:
        self._election.remove_listener(self._on_change)
        self._election.close()


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


def mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    cache = caches(coordinator)
    if cache is not None:
        return _CachedLeaseMirror(coordinator, cache, body)
    return _LeaseMirror(coordinator, body, wake)


async def after_snapshot(resource: LiveResource, snapshot: Snapshot) -> None:
    lease_seconds = float((resource.body.get("spec") or {}).get("leaseDurationSeconds", DEFAULT_LEASE_DURATION))
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

