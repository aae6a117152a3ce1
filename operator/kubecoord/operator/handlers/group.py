"""Group: the members of one group (member Leases on kubernetes, ephemeral znodes on zookeeper).

Status: members (id, data), memberCount, generation. Events MemberJoined, MemberLeft and
MemberExpired. Expired members are deleted: on kubernetes a member that leaves deletes
its own Lease, so a member that vanished from the live membership while its Lease is
still there has expired — the operator deletes that Lease and reports the expiry. New
member Leases are adopted (ownerReference to the Group). On zookeeper the server removes
an expired member's ephemeral znode itself, and a departure is reported as MemberLeft.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.operator import backing, metrics
from kubecoord.operator.handlers._resource import Context, History, register
from kubecoord.operator.mirror import GroupMirror, Mirror, Notice, Snapshot


def _mirror(coordinator: Coordinator, body: dict[str, Any], wake: Callable[[], None]) -> Mirror:
    return GroupMirror(coordinator, body["metadata"]["name"], dict(body.get("status") or {}), wake)


async def _after(context: Context, snapshot: Snapshot) -> None:
    metrics.GROUP_MEMBERS.labels(context.namespace, context.name).set(snapshot.status["memberCount"])
    kubernetes = context.backend.backend == "kubernetes"
    for member in sorted(snapshot.joined):
        History.record(
            context.backend, context.namespace, primitive="group", name=context.name, event="joined", member=member
        )
    if kubernetes and snapshot.joined:
        await backing.adopt_members(dict(context.body), await backing.member_leases(dict(context.body)))
    for member in sorted(snapshot.gone):
        expired = kubernetes and await backing.delete_member(dict(context.body), member)
        if expired:
            context.post(
                Notice("Warning", "MemberExpired", f"{member} expired (stopped renewing); its Lease was deleted")
            )
        else:
            context.post(Notice("Normal", "MemberLeft", f"{member} left"))
        event = "expired" if expired else "left"
        History.record(
            context.backend, context.namespace, primitive="group", name=context.name, event=event, member=member
        )


register("groups", _mirror, _after)
