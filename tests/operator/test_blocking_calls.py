"""The operator's blocking one-shot calls (kubecoord.operator.kubeapi.call) go through
pykube-ng's HTTPClient with the one credential rule's credentials: what they carry, how
their errors read, and that a write whose answer was lost is not sent again."""

from __future__ import annotations

import asyncio
import os
import pathlib
from typing import Any

import pytest
import yaml
from aiohttp import web

from kubecoord.operator import kubeapi
from tests.operator.local_api import aborting, local_api

PATH = "/api/v1/namespaces/default/configmaps"


def test_a_call_carries_the_credentials_user_agent_and_given_headers(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append({**request.headers, "method": request.method, "body": await request.text()})
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "x"}}, status=201)

    async def main() -> Any:
        async with local_api(handle, tmp_path, monkeypatch):
            return await asyncio.to_thread(kubeapi.call, "POST", f"{PATH}?dryRun=All", {"metadata": {"name": "x"}},
                                           headers={"Impersonate-Extra-Term": "7"})

    assert asyncio.run(main()) == {"kind": "ConfigMap", "metadata": {"name": "x"}}
    [request] = seen
    assert request["Authorization"] == "Bearer t"  # local_api's kubeconfig user
    assert request["User-Agent"] == kubeapi.USER_AGENT
    assert request["Impersonate-Extra-Term"] == "7"
    assert request["Content-Type"] == "application/json" and request["body"] == '{"metadata": {"name": "x"}}'


def test_an_error_answer_is_the_request_failed_it_was(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def handle(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "message": "configmaps \"x\" already exists"}, status=409,
                                 reason="Conflict")

    async def main() -> kubeapi.RequestFailed:
        async with local_api(handle, tmp_path, monkeypatch):
            with pytest.raises(kubeapi.RequestFailed) as caught:
                await asyncio.to_thread(kubeapi.call, "POST", PATH, {"metadata": {"name": "x"}}, headers={})
            return caught.value

    error = asyncio.run(main())
    assert error.status == 409 and isinstance(error, kubeapi.ApiException)
    assert str(error) == f'POST {PATH}: HTTP 409 Conflict: configmaps "x" already exists'


@pytest.mark.parametrize("body", ["<html>a proxy's page</html>", "[" * 100_000 + "]" * 100_000],
                         ids=["html", "nested-too-deep"])
def test_a_2xx_answer_that_is_not_json_is_an_api_exception_on_both_faces(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    async def handle(request: web.Request) -> web.Response:
        return web.Response(text=body, status=200)

    async def main() -> list[kubeapi.ApiException]:
        errors = []
        async with local_api(handle, tmp_path, monkeypatch):
            with pytest.raises(kubeapi.ApiException) as blocking:
                await asyncio.to_thread(kubeapi.call, "GET", PATH)
            errors.append(blocking.value)
            with pytest.raises(kubeapi.ApiException) as on_loop:
                await kubeapi.acall("GET", PATH)
            errors.append(on_loop.value)
        return errors

    for error in asyncio.run(main()):
        assert error.status == 200 and "not JSON" in str(error.reason)


def test_a_write_whose_answer_was_lost_is_an_os_error_and_sent_once(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[str] = []

    async def main() -> None:
        async with local_api(aborting(received), tmp_path, monkeypatch):
            with pytest.raises(OSError):
                await asyncio.to_thread(kubeapi.call, "PUT", f"{PATH}/x", {"metadata": {"name": "x"}}, headers={})

    asyncio.run(main())
    assert received == ["PUT"]


def test_a_kubeconfig_proxy_is_where_the_call_goes(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubeconfig's proxy-url: the asynchronous face does not send through it, so acall's
    request goes through the blocking face (in a thread), which goes through the proxy."""
    targets: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        targets.append(str(request.url))
        return web.json_response({"kind": "ConfigMapList", "items": []})

    async def main() -> Any:
        async with local_api(proxy, tmp_path, monkeypatch):
            kubeconfig = pathlib.Path(os.environ["KUBECONFIG"])
            doc = yaml.safe_load(kubeconfig.read_text())
            proxy_url = doc["clusters"][0]["cluster"]["server"]
            doc["clusters"][0]["cluster"] = {"server": "http://api.invalid:6443", "proxy-url": proxy_url}
            kubeconfig.write_text(yaml.safe_dump(doc))
            kubeapi.reset()
            return await kubeapi.acall("GET", PATH)

    assert asyncio.run(main()) == {"kind": "ConfigMapList", "items": []}
    assert targets == [f"http://api.invalid:6443{PATH}"]  # the absolute form a proxy is sent
