"""Streaming a watch: chunked JSON lines, one event per line, flushed per event.

A watch from a resourceVersion replays the retained events after it; without one (or
"0") it starts with a synthetic ADDED per current object. A resourceVersion older than
the retained history answers HTTP 200 with one ERROR event (a 410 Expired Status) and
ends, as the API server does. ``timeoutSeconds`` ends the stream; with
``allowWatchBookmarks`` a BOOKMARK carrying the current resourceVersion is sent whenever
the stream has been idle for ``bookmark_interval`` seconds (and once after the initial
events when ``sendInitialEvents=true``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from kubecoord.testing.emulator.resources import ResourceType
from kubecoord.testing.emulator.status import StatusError, bad_request
from kubecoord.testing.emulator.store import Store

JSON = dict[str, Any]


def _line(event_type: str, obj: JSON) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _bookmark(rtype: ResourceType, rv: int, *, initial_end: bool = False) -> bytes:
    meta: JSON = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return _line("BOOKMARK", {"kind": rtype.kind, "apiVersion": rtype.group_version, "metadata": meta})


async def stream(
    request: web.Request,
    store: Store,
    rtype: ResourceType,
    namespace: str | None,
    predicate: Any,
    *,
    bookmark_interval: float,
) -> web.StreamResponse:
    query = request.query
    raw_rv = query.get("resourceVersion", "")
    if raw_rv and not raw_rv.isdigit():
        raise bad_request(f'invalid resource version "{raw_rv}"')
    since = None if raw_rv in ("", "0") else int(raw_rv)
    timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
    bookmarks = query.get("allowWatchBookmarks", "").lower() in ("1", "true")
    initial_end = bookmarks and since is None and query.get("sendInitialEvents", "").lower() == "true"
    loop = asyncio.get_running_loop()

    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    try:
        watcher = store.watch(rtype.key, namespace, predicate, since, loop)
    except StatusError as error:  # too old: one ERROR event, then the end
        await response.prepare(request)
        await response.write(_line("ERROR", error.body))
        await response.write_eof()
        return response
    try:
        await response.prepare(request)
        if initial_end:
            await _drain(response, watcher.queue, rtype)
            await response.write(_bookmark(rtype, store.resource_version, initial_end=True))
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            wait = bookmark_interval if bookmarks else None
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    break
                wait = left if wait is None else min(wait, left)
            try:
                item = await asyncio.wait_for(watcher.queue.get(), wait)
            except TimeoutError:
                if bookmarks and watcher.settled():
                    await response.write(_bookmark(rtype, store.resource_version))
                continue
            if item is None:
                break
            await response.write(_present(rtype, *item))
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass  # the client went away
    finally:
        store.unwatch(watcher)
    return response


def _present(rtype: ResourceType, event_type: str, obj: JSON) -> bytes:
    if obj.get("apiVersion") != rtype.group_version:
        obj = {**obj, "apiVersion": rtype.group_version}
    return _line(event_type, obj)


async def _drain(
    response: web.StreamResponse, queue: asyncio.Queue[tuple[str, JSON] | None], rtype: ResourceType
) -> None:
    while not queue.empty():
        item = queue.get_nowait()
        if item is None:
            queue.put_nowait(None)
            return
        await response.write(_present(rtype, *item))
