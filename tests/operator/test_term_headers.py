"""The operator's writes name its term (kubecoord.operator.term), its reads do not; the
test seam between the fencing check and the send runs only for writes the check allowed.

A local HTTP server records what each request carried, through both of kubeapi's paths
(``acall`` on the event loop, ``call`` blocking). What the API server does with the term
is tested on the whole cluster (test_fenced_writes_real.py).
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import pytest
from aiohttp import web

from kubecoord.operator import fencing, kubeapi, term
from tests.operator.local_api import local_api

ACCOUNT = "system:serviceaccount:kubecoord-system:kc-kubecoord"
TERM_HEADER = "Impersonate-Extra-kubecoord.dev%2Fterm"


@pytest.fixture
def restore_fencing() -> Iterator[None]:
    yield
    fencing.install(None)
    fencing.set_before_send(None)


def test_a_term_is_sent_as_the_service_account_impersonating_itself() -> None:
    assert term.headers(ACCOUNT, term.Term("pod-a", 7)) == {"Impersonate-User": ACCOUNT, TERM_HEADER: "pod-a/7"}


def test_only_a_service_account_can_name_a_term() -> None:
    with pytest.raises(term.FencingUnavailable, match="ServiceAccount"):
        term.headers("admin", term.Term("pod-a", 7))


def test_the_seam_runs_after_the_check_and_only_for_allowed_writes(restore_fencing: None) -> None:
    seen: list[tuple[str, str]] = []
    leading = [True]
    fencing.install(lambda: leading[0], headers={"X": "1"})
    fencing.set_before_send(lambda method, path: seen.append((method, path)))
    assert fencing.admit("PATCH", "/a") == {"X": "1"}
    leading[0] = False
    assert fencing.admit("PATCH", "/b") is None
    assert seen == [("PATCH", "/a")]


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, dict(request.headers)))
        return web.json_response({})


def test_writes_carry_the_term_and_reads_do_not(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                restore_fencing: None) -> None:
    asyncio.run(_through_both_paths(tmp_path, monkeypatch))


async def _through_both_paths(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    fencing.install(lambda: True, headers=term.headers(ACCOUNT, term.Term("pod-a", 3)))
    async with local_api(recorder.handle, tmp_path, monkeypatch):
        path = "/api/v1/namespaces/default/configmaps/x"
        await kubeapi.acall("PATCH", path, {}, content_type=kubeapi.MERGE_PATCH)
        await kubeapi.acall("GET", path)
        await asyncio.to_thread(kubeapi.call, "DELETE", path)
        await asyncio.to_thread(kubeapi.call, "GET", path)
    terms = [(method, headers.get(TERM_HEADER), headers.get("Impersonate-User")) for method, headers in recorder.seen]
    assert terms == [("PATCH", "pod-a/3", ACCOUNT), ("GET", None, None), ("DELETE", "pod-a/3", ACCOUNT),
                     ("GET", None, None)]

