"""Every write the operator makes is bounded by the operator Lease's term.

A write request sent while this replica leads must be answered or abandoned before a
standby may take the Lease: its timeout is at most lease duration - renew deadline (and
below the renew deadline); a write that timed out is not re-sent by the transport, and
the work queue's retry asks the fencing check again, so a replica whose term ended sends
nothing more. Checked by inspecting the configured timeouts and by counting the requests
a server that never answers receives (no timed assertion: the only deadline is a
generous guard against a request that would hang for the old 30 s).
"""

from __future__ import annotations

import asyncio
import pathlib
import threading
from collections.abc import Iterator

import pytest
from aiohttp import web

import kubecoord
from kubecoord.operator import connections, fencing, ha, kubeapi
from kubecoord.operator.health import HealthState
from kubecoord.resources import BackendSpec
from tests.operator.local_api import local_api

LEASE, RENEW = 3.0, 2.0


@pytest.fixture
def restore_fencing() -> Iterator[None]:
    yield
    fencing.install(None)


@pytest.mark.parametrize(("lease", "renew"), [(15.0, 10.0), (3.0, 2.0), (60.0, 20.0), (11.0, 10.0)])
def test_a_write_timeout_ends_within_the_term(lease: float, renew: float, restore_fencing: None) -> None:
    fencing.install(lambda: True, lease_duration=lease, renew_deadline=renew)
    timeout = kubeapi.timeout_for("PATCH")
    assert timeout < renew  # below the renew deadline ...
    assert renew + timeout <= lease  # ... and over before a standby may acquire
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert kubeapi.timeout_for(method) == timeout
    assert kubeapi.timeout_for("GET") == kubeapi.REQUEST_TIMEOUT  # reads are not fenced


def test_the_operator_backends_writes_are_capped_too(restore_fencing: None) -> None:
    fencing.install(lambda: True, lease_duration=LEASE, renew_deadline=RENEW)
    spec = BackendSpec.from_spec({"backend": "kubernetes"}, namespace="default")
    assert connections.connect_options(spec)["request_timeout"] <= LEASE - RENEW < RENEW


def test_the_active_replica_installs_its_lease_timings(restore_fencing: None) -> None:
    """run_when_leading (what ``kubecoord operator`` runs) bounds writes by its timings."""
    seen: list[float] = []

    def run_operator(scope: ha.Scope, stop: threading.Event) -> None:
        seen.append(fencing.write_timeout())

    with kubecoord.connect("memory://write-timeouts") as coordinator:
        result: list[int] = []
        # In a thread of its own: run_when_leading installs signal handlers only on the main thread.
        thread = threading.Thread(target=lambda: result.append(ha.run_when_leading(
            coordinator, "replica-a", ha.Scope((), True), HealthState(), run_operator,
            lease_duration=LEASE, renew_deadline=RENEW)))
        thread.start()
        thread.join(60)
    assert result == [0]
    assert seen == [min(RENEW / 2, LEASE - RENEW)]
    assert not fencing.allowed()  # after the term: no write at all


class Stalled:
    """An HTTP server that accepts every request and never answers (counted)."""

    def __init__(self) -> None:
        self.requests = 0
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        await self.release.wait()
        return web.json_response({})


def test_a_write_that_times_out_is_retried_only_within_the_term(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, restore_fencing: None
) -> None:
    asyncio.run(_write_to_a_stalled_server(tmp_path, monkeypatch))


async def _write_to_a_stalled_server(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stalled = Stalled()
    leading = [True]
    fencing.install(lambda: leading[0], lease_duration=LEASE, renew_deadline=RENEW)
    async with local_api(stalled.handle, tmp_path, monkeypatch):
        try:
            # A guard far above the write timeout (1 s) and far below the 30 s it used to be.
            with pytest.raises(ConnectionError):
                await asyncio.wait_for(kubeapi.acall("PUT", "/api/v1/namespaces/default/configmaps/x", {}), 20)
            assert stalled.requests == 1  # abandoned, not re-sent
            leading[0] = False  # the term ended: the work queue's retry asks first
            with pytest.raises(kubeapi.ApiException) as refused:
                await kubeapi.acall("PUT", "/api/v1/namespaces/default/configmaps/x", {})
            assert refused.value.reason.startswith("NotLeading")
            assert stalled.requests == 1
        finally:
            stalled.release.set()
