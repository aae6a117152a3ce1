"""The operator's asynchronous API requests, made on its event loop (aiohttp) instead of
in executor threads through the blocking kubernetes client.

Why: profiled at 2,000 resources, the controller's workers spent a quarter of
the operator's CPU in the blocking client — the thread hand-over of every request, the
client's serialisation, urllib3 and http.client's header parsing — and at most as many
requests were in flight as the executor had threads (six), so the operator drained
resources no faster than its few workers' round trips allowed, whatever the API server
could take. On the loop, a request costs no thread and the number in flight is the
number of workers.

Where and as whom a request goes is the backend's Endpoint (kubecoord.backends.kubernetes:
the one place that turns the kubernetes client's configuration — kubecoord.operator.kubeapi's,
by the one credential rule — into a TLS context and headers), its credentials read per
request, so a rotated service-account token (the configuration's refresh hook) is used as
soon as the client would use it. A configuration this module does not send through — an
HTTP proxy — is reported by ``supported`` and the caller sends it through the blocking
client (kubeapi.call, pykube-ng's HTTPClient) instead.

Why hand-written: no library makes these requests on an asyncio loop from the one
credential rule's configuration. pykube-ng (the operator's blocking calls) and the official
client send through requests and urllib3, a thread per request in flight; kopf's own
aiohttp client is private to kopf (``kopf._cogs``); kubernetes_asyncio is a second whole
client with its own configuration loader. This module is the operator's one asynchronous
request path, over aiohttp, which kopf already brings.

Guarantees: one aiohttp session (one connection pool) per event loop, closed by
``close``; every request bounded by ``timeout`` in total; a transport failure (refused,
reset, timed out) raises ConnectionError (an OSError, as the callers expect of the
network), never aiohttp's own exceptions.
Not guaranteed: retries (the work queue retries a failed key with its backoff).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any

import aiohttp
import kubernetes.client

from kubecoord.backends.kubernetes import Answer, Endpoint


def supported(configuration: kubernetes.client.Configuration) -> bool:
    """Whether requests per ``configuration`` can be made here (no proxy)."""
    return not configuration.proxy


class _Session:
    def __init__(self, configuration: kubernetes.client.Configuration) -> None:
        self.configuration = configuration
        self.endpoint = Endpoint.from_configuration(configuration, user_agent="")
        self.host = str(configuration.host).rstrip("/")
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.endpoint.tls or False, limit=64),
            # No cookie jar: the API server sets none, and aiohttp's jar would parse every
            # answer's headers for them.
            cookie_jar=aiohttp.DummyCookieJar(),
            # Bodies are JSON already serialised here: no aiohttp compression negotiation.
            auto_decompress=False,
        )


_closing: set[asyncio.Task[None]] = set()
"""Sessions being closed (a task must be referenced until it ends)."""
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Session] = weakref.WeakKeyDictionary()


def _session(configuration: kubernetes.client.Configuration) -> _Session:
    loop = asyncio.get_running_loop()
    current = _sessions.get(loop)
    if current is None or current.configuration is not configuration or current.session.closed:
        if current is not None and not current.session.closed:
            # A new configuration (tests switching clusters): the old pool goes.
            closing = loop.create_task(current.session.close())
            _closing.add(closing)
            closing.add_done_callback(_closing.discard)
        current = _sessions[loop] = _Session(configuration)
    return current


async def request(configuration: kubernetes.client.Configuration, method: str, path: str, body: Any,
                  *, content_type: str, timeout: float, user_agent: str,
                  headers: dict[str, str] | None = None) -> Answer:
    """One request; the answer whatever its status (the caller decides what is an error).
    ``headers`` are sent too (the operator's term on its writes)."""
    session = _session(configuration)
    # identity: aiohttp would otherwise offer gzip, and the API server compresses answers
    # above 128 KiB (a namespace's list once one resource is large), which this session
    # does not decompress.
    headers = {**(headers or {}), **session.endpoint.request_headers(), "Accept-Encoding": "identity",
               "User-Agent": user_agent}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = content_type
    try:
        async with session.session.request(
            method, f"{session.host}{path}", data=data, headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout), server_hostname=session.endpoint.server_hostname,
        ) as answer:
            payload = await answer.read()
            return Answer(answer.status, answer.reason or "", payload, dict(answer.headers))
    except (aiohttp.ClientError, TimeoutError) as error:
        raise ConnectionError(f"{method} {path}: {type(error).__name__}: {error}") from error


async def close() -> None:
    """Close this loop's session (the operator's cleanup; before its loop ends)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    current = _sessions.pop(loop, None)
    if current is not None:
        await current.session.close()
