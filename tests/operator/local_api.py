"""An HTTP server on 127.0.0.1 that kubecoord.operator.kubeapi talks to, for tests of what
the operator's requests carry and how they end (no Kubernetes behind it)."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import yaml
from aiohttp import web

from kubecoord.operator import kubeapi, loop_requests


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
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    kubeapi.reset()
    try:
        yield
    finally:
        await loop_requests.close()
        await runner.cleanup()
        kubeapi.reset()
