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
from kubecoord.operator import kubeapi, metrics
from kubecoord.operator.handlers._resource import Context, History, register
from kubecoord.operator.mirror import LeaderMirror, Mirror, Snapshot
from kubecoord.wire import object_names


def _mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    return LeaderMirror(coordinator, body["metadata"]["name"], dict(body.get("status") or {}), wake)


async def _after(context: Context, snapshot: Snapshot) -> None:
    lease_seconds = float((context.body.get("spec") or {}).get("leaseDurationSeconds", 15))
    metrics.leader_presence(context.namespace, context.name, present=bool(snapshot.status.get("leader")),
                            lease_seconds=lease_seconds)
    for notice in snapshot.notices:
        metrics.LEADER_CHANGES.labels(context.namespace, context.name).inc()
        History.record(
            context.backend,
            context.namespace,
            primitive="leader_election",
            name=context.name,
            event="observed",
            member=snapshot.status.get("leader"),
            epoch=snapshot.status.get("epoch"),
            reason=notice.reason,
        )


    if snapshot.notices and context.backend.backend == "kubernetes":
        renew_time = None
        if snapshot.status.get("leader"):
            path = f"/apis/coordination.k8s.io/v1/namespaces/{context.namespace}/leases/"
            lease = await kubeapi.acall("GET", path + object_names.election_lease_name(context.name))
            renew_time = (lease.get("spec") or {}).get("renewTime")
        await kubeapi.patch_status("leaderelections", context.namespace, context.name, {"renewTime": renew_time})


register("leaderelections", _mirror, _after)
