"""Streaming a watch: chunked JSON lines, one event per line, flushed per event.

A watch from a resourceVersion replays the retained events after it; without one (or
"0") it starts with a synthetic ADDED per current object. A resourceVersion older than
the retained history answers HTTP 200 with one ERROR event (a 410 Expired Status) and
ends, as the API server does. ``timeoutSeconds`` ends the stream; with
``allowWatchBookmarks`` a BOOKMARK carrying the current resourceVersion is sent when
kube-apiserver 1.32 sends one (measured: tests/backends/kubernetes/test_watch_bookmarks.py runs on
both): every ``bookmark_interval`` seconds (a minute by default), events or not, and two
seconds and one second before the ``timeoutSeconds`` deadline; and once after the
initial events when ``sendInitialEvents=true``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from kubecoord_testkit.emulator.resources import ResourceType
from kubecoord_testkit.emulator.status import StatusError, bad_request
from kubecoord_testkit.emulator.store import Store

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
        start = loop.time()
        deadline = None if timeout is None else start + timeout
        due = _bookmark_times(start, deadline, bookmark_interval) if bookmarks else []
        while True:
            now = loop.time()
            if deadline is not None and now >= deadline:
                break
            if due and now >= due[0]:
                sent_at = due.pop(0)
                if deadline is None:
                    due.append(sent_at + bookmark_interval)
                if watcher.settled():
                    await response.write(_bookmark(rtype, store.resource_version))
                continue
            until = min((t for t in (due[0] if due else None, deadline) if t is not None), default=None)
            try:
                item = await asyncio.wait_for(watcher.queue.get(), None if until is None else max(0.0, until - now))
            except TimeoutError:
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


def _bookmark_times(start: float, deadline: float | None, interval: float) -> list[float]:
    """When a watch from ``start`` gets its bookmarks, as kube-apiserver 1.32's watch cache
    sends them (measured on the real server): one every ``interval`` (its bookmark
    frequency, a minute), events or not; and with a deadline (timeoutSeconds) two
    seconds and one second before it, so that a client resumes from a recent version."""
    if deadline is None:
        return [start + interval]
    times = [start + interval * n for n in range(1, int((deadline - 2 - start) // interval) + 1)]
    times += [t for t in (deadline - 2, deadline - 1) if t > start]
    return sorted(t for t in times if t < deadline)


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
