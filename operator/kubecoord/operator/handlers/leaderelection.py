"""LeaderElection: the Lease (kubernetes) or the election znodes (zookeeper) of one service.

Status: leader, leaderData, epoch, leaderSince; Events LeaderElected / LeaderLost; the
operator's event log gets an ``observed`` event per change of leader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.operator import metrics
from kubecoord.operator.handlers._resource import Context, History, register
from kubecoord.operator.mirror import LeaderMirror, Mirror, Snapshot


def _mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    return LeaderMirror(coordinator, body["metadata"]["name"], dict(body.get("status") or {}), wake)


async def _after(context: Context, snapshot: Snapshot) -> None:
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


register("leaderelections", _mirror, _after)
