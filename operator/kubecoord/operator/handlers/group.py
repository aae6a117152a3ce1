"""Group: the members of one group (member Leases on kubernetes, ephemeral znodes on zookeeper).

Status: members (id, data), memberCount, generation. Events MemberJoined, MemberLeft and
MemberExpired.

Expired members are deleted by the operator's own membership handle: on kubernetes every
observer of a group reaps a member whose Lease was not renewed within its duration (with
a resourceVersion precondition, so a late renewal wins), and the operator always
observes every group, so an expired member goes even when no client is left to notice.
The backend records each expiry it judged in the operator's event tap, which tells an
expiry from a leave for the Events. New member Leases are adopted (ownerReference to the
Group). On zookeeper the server removes an expired member's ephemeral znode itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.operator import backing, metrics
from kubecoord.operator.eventtap import tap
from kubecoord.operator.handlers._resource import Context, History, register
from kubecoord.operator.mirror import GroupMirror, Mirror, Notice, Snapshot

EXPIRY_WAIT_SECONDS = 1.0
"""How long to wait for the backend's expiry record before calling a departure a leave."""


def _mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    return GroupMirror(coordinator, body["metadata"]["name"], dict(body.get("status") or {}), wake)


async def _after(context: Context, snapshot: Snapshot) -> None:
    metrics.GROUP_MEMBERS.labels(context.namespace, context.name).set(snapshot.status["memberCount"])
    for member in sorted(snapshot.joined):
        _record(context, "joined", member)
    if context.backend.backend == "kubernetes" and snapshot.joined:
        await backing.adopt_members(dict(context.body), await backing.member_leases(dict(context.body)))
    for member in sorted(snapshot.gone):
        expired = await asyncio.to_thread(tap.wait_for, "group", context.name, "expired", member, EXPIRY_WAIT_SECONDS)
        if expired:
            context.post(Notice("Warning", "MemberExpired", f"{member} expired (stopped renewing) and was removed"))
        else:
            context.post(Notice("Normal", "MemberLeft", f"{member} left"))
        _record(context, "expired" if expired else "left", member)


def _record(context: Context, event: str, member: str) -> None:
    History.record(context.backend, context.namespace, primitive="group", name=context.name, event=event, member=member)


register("groups", _mirror, _after)
