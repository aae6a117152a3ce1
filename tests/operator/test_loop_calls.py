"""The operator's asynchronous requests (kubecoord.operator.kubeapi.acall) run on its event
loop through the transport's asynchronous face: no executor thread per request, answers and
errors as the blocking face gives them, a write sent once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import json
import os
import pathlib
import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp import web

from kubecoord.operator import kubeapi
from tests.operator.local_api import aborting, local_api, write_kubeconfig


@pytest.fixture
def emulator_env(kubeconfig_path: pathlib.Path) -> Iterator[None]:
    with _kubeconfig(str(kubeconfig_path)):
        yield


class _Counting(concurrent.futures.ThreadPoolExecutor):
    submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        _Counting.submitted += 1
        return super().submit(fn, *args, **kwargs)


def _run(main: Callable[[], Any]) -> Any:
    """Run ``main()`` on a new loop whose default executor counts what is handed to it."""

    async def wrapped() -> Any:
        executor = _Counting(max_workers=2)
        asyncio.get_running_loop().set_default_executor(executor)
        try:
            return await main()
        finally:
            await kubeapi.aclose()

    _Counting.submitted = 0
    return asyncio.run(wrapped())


def test_requests_take_no_executor_thread_and_run_at_once(emulator_env: None) -> None:
    name = f"loop-{uuid.uuid4().hex[:8]}"
    collection = "/api/v1/namespaces/default/configmaps"

    async def main() -> list[Any]:
        await kubeapi.acall("POST", collection, {"metadata": {"name": name}, "data": {"k": "v"}})
        # Twenty reads at once: on the loop, none waits for a thread of a six-thread pool.
        reads = await asyncio.gather(*(kubeapi.acall("GET", f"{collection}/{name}") for _ in range(20)))
        await kubeapi.acall("DELETE", f"{collection}/{name}")
        return reads

    reads = _run(main)
    assert [read["data"] for read in reads] == [{"k": "v"}] * 20
    assert _Counting.submitted == 0  # the blocking client would have taken 22 hand-overs


def test_an_error_answer_is_the_request_failed_it_was(emulator_env: None) -> None:
    path = f"/api/v1/namespaces/default/configmaps/absent-{uuid.uuid4().hex[:8]}"

    async def main() -> kubeapi.RequestFailed:
        with pytest.raises(kubeapi.RequestFailed) as caught:
            await kubeapi.acall("GET", path)
        return caught.value

    error = _run(main)
    assert error.status == 404 and isinstance(error, kubeapi.ApiException)
    assert str(error).startswith(f"GET {path}: HTTP 404")


def test_a_refused_connection_is_an_os_error(tmp_path: pathlib.Path) -> None:
    with socket.socket() as bound:  # a port bound and not listening
        bound.bind(("127.0.0.1", 0))
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{bound.getsockname()[1]}")
        with _kubeconfig(str(kubeconfig)), pytest.raises(ConnectionError, match="GET /api/v1/namespaces"):
            _run(lambda: kubeapi.acall("GET", "/api/v1/namespaces"))


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "POST"])
def test_a_write_whose_connection_broke_after_sending_is_sent_once(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """aiohttp would send a PUT or DELETE again on a new connection (its retry of
    "idempotent" methods): a write the server may have applied must not go twice."""
    received: list[str] = []

    async def main() -> None:
        monkeypatch.setattr(kubeapi, "_admitted", lambda method, path: {})
        async with local_api(aborting(received), tmp_path, monkeypatch):
            with pytest.raises(OSError):
                await kubeapi.acall(method, "/api/v1/namespaces/default/configmaps/x", {"metadata": {"name": "x"}})

    asyncio.run(main())
    assert received == [method]


def test_a_read_whose_connection_broke_before_answering_is_sent_once_more(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[str] = []

    async def main() -> Any:
        async with local_api(aborting(received, answer_from=2), tmp_path, monkeypatch):
            return await kubeapi.acall("GET", "/api/v1/namespaces/default/configmaps")

    assert asyncio.run(main()) == {"kind": "ConfigMapList", "items": []}
    assert received == ["GET", "GET"]


class _kubeconfig:
    """KUBECONFIG pointing at ``path`` (the operator's client re-read) for a with block."""

    def __init__(self, path: str) -> None:
        self._path, self._previous = path, os.environ.get("KUBECONFIG")

    def __enter__(self) -> None:
        os.environ["KUBECONFIG"] = self._path
        kubeapi.reset()

    def __exit__(self, *_: object) -> None:
        if self._previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = self._previous
        kubeapi.reset()


def test_a_large_answer_is_read_whatever_the_server_would_compress(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server gzips answers above 128 KiB for a client that offers gzip (a list of a
    namespace holding one large resource); the operator's requests must get them readable."""
    asyncio.run(_large_answer(tmp_path, monkeypatch))


async def _large_answer(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items = {"items": [{"metadata": {"name": f"n{i}"}, "data": {"k": "\u4e00" * 200}} for i in range(400)]}
    body = json.dumps(items).encode()

    async def handle(request: web.Request) -> web.Response:
        if "gzip" in request.headers.get("Accept-Encoding", ""):  # what kube-apiserver does
            return web.Response(body=gzip.compress(body), headers={"Content-Encoding": "gzip",
                                                                   "Content-Type": "application/json"})
        return web.Response(body=body, content_type="application/json")

    async with local_api(handle, tmp_path, monkeypatch):
        assert await kubeapi.acall("GET", "/api/v1/namespaces/default/configmaps") == items
