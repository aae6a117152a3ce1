"""An HTTP server on 127.0.0.1 that kubecoord.operator.kubeapi talks to, for tests of what
the operator's requests carry and how they end (no Kubernetes behind it)."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import yaml
from aiohttp import web

from kubecoord.operator import kubeapi


@contextlib.asynccontextmanager
async def local_api(handle: Callable[[web.Request], Awaitable[web.Response]], tmp_path: pathlib.Path,
                    monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Every request goes to ``handle``; KUBECONFIG points at the server while inside."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")))
    kubeapi.reset()
    try:
        yield
    finally:
        await kubeapi.aclose()
        await runner.cleanup()
        kubeapi.reset()


def write_kubeconfig(path: pathlib.Path, server: str) -> pathlib.Path:
    """A kubeconfig at ``path`` for ``server``, user token "t"."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def aborting(received: list[str], *, answer_from: int = 0) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A handler that records each request's method and breaks its connection before any
    answer; from the ``answer_from``-th request on (when given) it answers an empty list."""

    async def handle(request: web.Request) -> web.Response:
        received.append(request.method)
        if answer_from and len(received) >= answer_from:
            return web.json_response({"kind": "ConfigMapList", "items": []})
        assert request.transport is not None
        request.transport.abort()
        return web.Response()

    return handle
