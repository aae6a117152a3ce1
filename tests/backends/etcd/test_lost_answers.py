"""A KV write whose answer is lost while etcd moves on behind it: the history compacted past
the write, the writer's lease revoked (its markers go with it) and replaced, or the answer
cut half-way through. The rule (docs/backends/etcd.md): a write is reported not applied
(a plain BackendUnavailableError, KeyExistsError, ...) only when it was not applied; else
its version, or OutcomeUnknownError. Judged by etcd itself: the key read back directly,
its version and the revisions etcdctl reports."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

import kubecoord
from kubecoord.errors import OutcomeUnknownError
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.etcd import EtcdCluster

from .conftest import eventually
from .etcdctl import etcdctl, keys, leases, revision
from .timings import TIMINGS

QUIET: dict[str, Any] = {"lease_duration": 10, "renew_deadline": 6.0, "retry_period": 4.9, "request_timeout": 5.0}
"""No keep-alive for ~5 s after connect: the proxy's ``hold(after=1)`` catches the write."""



def _start_write(
    url: str, options: dict[str, Any], write: str, value: str = "v"
) -> tuple[threading.Thread, list[object]]:
    """A thread that connects, then (once started) writes key k of store s and closes."""
    outcome: list[object] = []
    coord = kubecoord.connect(url, **options)
    store = coord.storage("s")

    def run() -> None:
        try:
            if write == "put":
                outcome.append(store.put("k", value))
            else:
                outcome.append(store.update("k", value, expected_version=1))
        except Exception as exc:
            outcome.append(exc)
        finally:
            coord.close()

    return threading.Thread(target=run), outcome


def _wait_applied(direct: kubecoord.api.Coordinator, value: str) -> int:
    """Wait until etcd has applied the write (read directly); the key's version then."""
    store = direct.storage("s")
    eventually(lambda: (store.fetch("k").result() == value), "the write never reached etcd")
    got = store.fetch_versioned("k").result()
    assert got is not None
    return got.version


def _truthful(outcome: list[object], version: int) -> None:
    """The write was applied (at ``version``): it must say so, or say it cannot tell."""
    assert len(outcome) == 1, outcome
    assert outcome[0] == version or type(outcome[0]) is OutcomeUnknownError, (
        f"an applied write was reported as {outcome[0]!r}"
    )


@pytest.mark.parametrize("write", ["put", "update"])
def test_a_write_applied_then_compacted_past_is_not_reported_not_applied(
    etcd_server: EtcdCluster, proxies: list[ThreadedFaultProxy], write: str
) -> None:
    prefix = f"lost-{uuid.uuid4().hex[:8]}"
    direct = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **TIMINGS)
    if write == "update":
        direct.storage("s").put("k", "before")
    proxy = proxies[0]
    writer, outcome = _start_write(f"etcd://{proxy.address}/{prefix}", QUIET, write)
    proxy.hold("down", after=1)  # the write reaches etcd; its answer waits
    writer.start()
    version = _wait_applied(direct, "v")
    direct.storage("s").put("later", "x")  # the revision moves past the write's
    etcdctl(etcd_server, "compact", str(revision(etcd_server)))  # history up to now is gone
    proxy.cut()  # the answer is lost
    proxy.heal()
    writer.join(20)
    _truthful(outcome, version)
    direct.close()


def test_a_write_whose_lease_was_revoked_and_replaced_is_not_reported_not_applied(
    etcd_server: EtcdCluster, proxies: list[ThreadedFaultProxy]
) -> None:
    prefix = f"lost-{uuid.uuid4().hex[:8]}"
    first, second = proxies
    direct = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **TIMINGS)
    patient = {**QUIET, "request_timeout": 20.0}  # the held write waits while the lease is replaced
    writer, outcome = _start_write(f"etcd://{first.address},{second.address}/{prefix}", patient, "put")
    first.hold("down", after=1)  # the write reaches etcd through the first endpoint; its answer waits
    first.refuse()  # from now on requests go to the second endpoint
    writer.start()
    version = _wait_applied(direct, "v")
    markers = keys(etcd_server, f"{prefix}/_kubecoord/writes/")
    assert len(markers) == 1, markers  # the write's marker, on the writer's lease
    lease = markers[0].split("/")[-2]
    before = leases(etcd_server)
    etcdctl(etcd_server, "lease", "revoke", lease)  # the marker goes with the lease
    eventually(lambda: bool(leases(etcd_server) - before), "the writer never granted a new lease")  # its keep-alive
    first.cut()  # the answer is lost; the writer resolves through the second endpoint
    writer.join(30)
    first.heal()
    _truthful(outcome, version)
    direct.close()


def test_a_write_whose_answer_is_cut_half_way_is_not_reported_not_applied(
    etcd_server: EtcdCluster, proxies: list[ThreadedFaultProxy]
) -> None:
    prefix = f"lost-{uuid.uuid4().hex[:8]}"
    proxy = proxies[0]
    value = "x" * 300_000  # the answer (it reads the key back) spans several of the proxy's chunks
    writer, outcome = _start_write(f"etcd://{proxy.address}/{prefix}", QUIET, "put", value)
    proxy.cut_after(1, "down")  # the answer's first chunk (its headers) arrives, then a reset
    writer.start()
    writer.join(20)
    direct = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **TIMINGS)
    assert _wait_applied(direct, value) == 1
    _truthful(outcome, 1)
    direct.close()
