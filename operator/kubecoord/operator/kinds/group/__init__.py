"""Group: the members of one group (member Leases on kubernetes, ephemeral znodes on zookeeper).

Status: members (id, data), memberCount, generation. Events MemberJoined, MemberLeft and
MemberExpired. Groups whose members use the group coordinator also show its generation,
phase, protocol, leader and each member's units, with RebalanceStarted/Completed Events;
with spec.assignment the operator computes the assignment (group/assignment.py).

Expired members are deleted by the operator: on kubernetes every observer of a group
reaps a member whose Lease was not renewed within its duration (with a resourceVersion
precondition, so a late renewal wins), and the operator always observes every group —
from its Lease cache, with no handle (group/cached.py), or through its
membership handle where it leads the assignment — so an expired member goes even when
no client is left to notice.
The operator also watches member Leases to tell an expiry from a leave for the Events
(kubecoord.operator.departures). New member Leases are adopted (ownerReference to the
Group). On zookeeper the server removes an expired member's ephemeral znode itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.operator import backing, metrics
from kubecoord.operator.controller.reconciler import LiveResource
from kubecoord.operator.departures import departures
from kubecoord.operator.kinds.group.assignment import AssignmentSpec, CoordinatedGroupMirror
from kubecoord.operator.kinds.group.cached import CachedGroupMirror
from kubecoord.operator.kinds.history import History
from kubecoord.operator.mirror import Mirror, Notice, Snapshot, caches
from kubecoord.wire.events import Event, Primitive

VERDICT_WAIT_SECONDS = 5.0
"""How long to wait for the member Lease's deletion to be seen before calling it a leave."""


def mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    # The membership plus the group coordinator's generation record: from the namespace
    # caches (group/cached.py), or through handles where the operator leads the
    # group's assignment or the backend has no such cache (group/assignment.py).
    cache = caches(coordinator)
    if cache is not None and AssignmentSpec.from_spec(dict(body.get("spec") or {})) is None:
        return CachedGroupMirror(coordinator, cache, body)
    return CoordinatedGroupMirror(coordinator, body, wake)


async def after_snapshot(resource: LiveResource, snapshot: Snapshot) -> None:
    metrics.GROUP_MEMBERS.labels(resource.namespace, resource.name).set(snapshot.status["memberCount"])
    kubernetes = resource.backend.backend == "kubernetes"
    for member in sorted(snapshot.joined):
        _record(resource, Event.JOINED, member)
    if kubernetes and snapshot.joined:
        await backing.adopt_members(dict(resource.body), await backing.member_leases(dict(resource.body)))
    for member in sorted(snapshot.gone):
        expired = kubernetes and await asyncio.to_thread(
            departures.verdict, resource.namespace, resource.name, member, VERDICT_WAIT_SECONDS
        )
        if expired:
            resource.post(Notice("Warning", "MemberExpired", f"{member} expired (stopped renewing) and was removed"))
        else:
            resource.post(Notice("Normal", "MemberLeft", f"{member} left"))
        _record(resource, Event.EXPIRED if expired else Event.LEFT, member)


def _record(resource: LiveResource, event: str, member: str) -> None:
    metrics.MEMBERSHIP_CHANGES.labels(resource.namespace, resource.name, event).inc()
    History.record(
        resource.backend, resource.namespace, primitive=Primitive.GROUP, name=resource.name, event=event, member=member
    )


def member_lease_event(type: str | None, body: dict[str, Any]) -> None:
    """A member Lease's watch event (kopf's watch of the Leases labelled as members)."""
    departures.observe(type, body)
