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
from kubecoord.capabilities import ObjectCache
from kubecoord.operator import metrics
from kubecoord.operator.handlers._resource import History, LiveResource, register
from kubecoord.operator.mirror import LeaderMirror, Mirror, Snapshot
from kubecoord.wire import object_names
from kubecoord.wire.events import Event, Primitive


class _LeaseMirror(LeaderMirror):
    """The leader mirror plus renewTime, read from the operator's Lease cache (no request)."""

    def __init__(self, coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> None:
        previous = dict(body.get("status") or {})
        super().__init__(coordinator, body["metadata"]["name"], previous, wake)
        # The kubernetes backend's watch cache (kubecoord.capabilities.ObjectCache), if any.
        self._observed = coordinator.observed if isinstance(coordinator, ObjectCache) else None
        self._lease = object_names.election_lease_name(body["metadata"]["name"])
        self._renew_time: str | None = previous.get("renewTime")

    def _snapshot(self) -> Snapshot:
        snapshot = super()._snapshot()
        if self._observed is not None and snapshot.notices:
            lease = self._observed("leases", self._lease) if snapshot.status.get("leader") else None
            self._renew_time = ((lease or {}).get("spec") or {}).get("renewTime")
        if self._observed is not None:
            snapshot.status["renewTime"] = self._renew_time
        return snapshot


def _mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
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
