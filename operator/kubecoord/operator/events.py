"""Kubernetes Events on the kubecoord resources, posted by the status controller.

kopf's ``kopf.event`` works only inside a kopf handler's context (it queues to the
per-object task kopf is running); the status controller's workers are not such tasks, so
they post through the operator's own client, in the shape kopf posts them (core/v1
Event, source component ``kubecoord-operator``, the message cut to 1 KiB).

Guarantees: posting never fails a reconcile — a refused post (a 403, the API server
down, this replica no longer leading) is logged at INFO and dropped; Events are auxiliary.
Not guaranteed: an Event per change (changes between two reconciles are folded), order
between Events of different resources.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from kubecoord.operator import kubeapi

log = logging.getLogger("kubecoord.operator")

COMPONENT = "kubecoord-operator"
MAX_MESSAGE = 1024
_tasks: set[asyncio.Task[None]] = set()
"""Strong references to posts in flight (the loop keeps only weak ones)."""


def body(obj: dict[str, Any], type_: str, reason: str, message: str) -> dict[str, Any]:
    metadata = obj["metadata"]
    now = dt.datetime.now(tz=dt.UTC).isoformat()
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE // 2 - 3] + "..." + message[-(MAX_MESSAGE // 2):]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": metadata["namespace"], "generateName": f"{metadata['name']}."},
        "type": type_,
        "reason": reason,
        "message": message,
        "action": reason,
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "source": {"component": COMPONENT},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": metadata["name"],
            "namespace": metadata["namespace"], "uid": metadata.get("uid"),
        },
        "firstTimestamp": now,
        "lastTimestamp": now,
        "eventTime": now,
        "count": 1,
    }


async def post(obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
    path = kubeapi.collection_path("v1", "events", obj["metadata"]["namespace"])
    try:
        await kubeapi.acall("POST", path, body(obj, type_, reason, message))
    except (kubeapi.ApiException, OSError) as error:
        log.info("event not posted", extra={"reason": reason, "resource": obj["metadata"].get("name"),
                                            "error": str(error)[:300]})


def post_soon(obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
    """Post from a coroutine's loop without waiting for it (the reconcile goes on)."""
    task = asyncio.get_running_loop().create_task(post(obj, type_, reason, message))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
