"""etcd:// behind the testkit's fault proxy: a write whose answer was lost is resolved by
its marker (applied, or aborted and reported not applied), and a leader cut off from etcd
stops leading before anybody else can lead."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import kubecoord
from kubecoord.errors import BackendUnavailableError, OutcomeUnknownError
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.etcd import EtcdCluster

from .timings import TIMINGS

QUIET: dict[str, Any] = {"lease_duration": 10, "renew_deadline": 6.0, "retry_period": 4.9, "request_timeout": 5.0}
"""No keep-alive for ~5 s after connect: the proxy's ``hold(after=1)`` catches the write."""


@pytest.fixture
def proxy(etcd_server: EtcdCluster) -> Iterator[ThreadedFaultProxy]:
    with ThreadedFaultProxy(("127.0.0.1", etcd_server.members[0].client_port)) as started:
        yield started


def _writer(url: str, key: str) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []
    coord = kubecoord.connect(url, **QUIET)
    store = coord.storage("s")

    def write() -> None:
        try:
            outcome.append(store.put(key, "v"))
        except Exception as exc:
            outcome.append(exc)
        finally:
            coord.close()

    return threading.Thread(target=write), outcome


def test_a_write_applied_but_unanswered_is_resolved_as_applied(
    etcd_server: EtcdCluster, proxy: ThreadedFaultProxy
) -> None:
    prefix = f"f-{uuid.uuid4().hex[:8]}"
    writer, outcome = _writer(f"etcd://{proxy.address}/{prefix}", "k")
    direct = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **TIMINGS)
    proxy.hold("down", after=1)  # the write reaches etcd; its answer waits
    writer.start()
    deadline = time.monotonic() + 10
    while direct.storage("s").fetch("k").result() is None:
        assert time.monotonic() < deadline, "the write never reached etcd"
        time.sleep(0.02)
    proxy.cut()  # the answer is lost
    proxy.heal()
    writer.join(20)
    assert outcome == [1], outcome  # resolved by its marker: applied, version 1
    assert direct.storage("s").fetch_versioned("k").result() == kubecoord.Versioned("v", 1)
    direct.close()


def test_a_write_that_never_arrived_is_reported_not_applied(
    etcd_server: EtcdCluster, proxy: ThreadedFaultProxy
) -> None:
    prefix = f"f-{uuid.uuid4().hex[:8]}"
    writer, outcome = _writer(f"etcd://{proxy.address}/{prefix}", "k")
    proxy.hold("up")  # the write never reaches etcd
    writer.start()
    time.sleep(0.5)
    proxy.cut()
    proxy.heal()
    writer.join(20)
    assert len(outcome) == 1 and type(outcome[0]) is BackendUnavailableError, outcome  # not OutcomeUnknownError
    direct = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **TIMINGS)
    assert direct.storage("s").fetch("k").result() is None  # and its abort keeps it from ever applying
    direct.close()


def test_a_write_without_any_answer_is_an_unknown_outcome(
    etcd_server: EtcdCluster, proxy: ThreadedFaultProxy
) -> None:
    prefix = f"f-{uuid.uuid4().hex[:8]}"
    options = {**QUIET, "request_timeout": 1.0}
    coord = kubecoord.connect(f"etcd://{proxy.address}/{prefix}", **options)
    proxy.drop()
    with pytest.raises(OutcomeUnknownError):
        coord.storage("s").put("k", "v")
    proxy.heal()
    coord.close()


def test_a_leader_cut_off_stops_leading_before_a_successor_leads(
    etcd_server: EtcdCluster, proxy: ThreadedFaultProxy
) -> None:
    prefix = f"f-{uuid.uuid4().hex[:8]}"
    cut_off = kubecoord.connect(f"etcd://{proxy.address}/{prefix}", **TIMINGS)
    other = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **TIMINGS)
    first, second = cut_off.leader_election("svc"), other.leader_election("svc")
    assert first.nominate("a")
    assert not second.nominate("b")
    proxy.drop()
    stopped = took_over = None
    deadline = time.monotonic() + 20
    while took_over is None:
        assert time.monotonic() < deadline, "b never took over"
        a, b = first.is_leader("a"), second.is_leader("b")
        assert not (a and b), "two leaders"
        now = time.monotonic()
        if not a and stopped is None:
            stopped = now
        if b:
            took_over = now
        time.sleep(0.01)
    assert stopped is not None and stopped < took_over
    proxy.heal()
    time.sleep(TIMINGS["lease_duration"] + 1)  # a's lease expired: it re-enters behind b
    assert second.is_leader("b") and not first.is_leader("a")
    cut_off.close()
    other.close()
