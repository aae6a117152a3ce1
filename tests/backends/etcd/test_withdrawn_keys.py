"""A candidate whose key could not be deleted when it resigned (etcd unreachable for the
delete) leaves a key that names its epoch. No later candidate of the same coordinator may
inherit that key or its epoch: the next leader's epoch is a new, higher create revision, and
the old key is deleted once etcd answers again. Nor does the key of a nominate() whose answer
was lost stay to lead while its coordinator lives. Judged by etcd: the keys etcdctl lists."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import kubecoord
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.etcd import EtcdCluster

from .conftest import eventually
from .etcdctl import etcdctl, keys

LONG_LEASE: dict[str, Any] = {"lease_duration": 10, "renew_deadline": 6.0, "retry_period": 1.0,
                              "request_timeout": 1.0}
"""The lease outlives the refused delete by far: the old key can only go by being deleted."""


def _election(proxy: ThreadedFaultProxy, options: dict[str, Any]) -> tuple[str, Any, Any]:
    """A fresh prefix, a coordinator through ``proxy`` and its election "job"."""
    prefix = f"wd-{uuid.uuid4().hex[:8]}"
    coord = kubecoord.connect(f"etcd://{proxy.address}/{prefix}", **options)
    return prefix, coord, coord.leader_election("job")


def test_a_key_left_by_a_failed_resign_is_never_inherited_by_the_next_candidate(
    etcd_server: EtcdCluster, proxies: list[ThreadedFaultProxy]
) -> None:
    proxy = proxies[0]
    prefix, coord, election = _election(proxy, LONG_LEASE)
    assert election.nominate("a")
    first = election.get_leader()
    assert first is not None and first.id == "a"
    proxy.refuse()
    proxy.cut()
    election.resign("a")  # its delete cannot reach etcd
    assert not election.is_leader("a")
    proxy.refuse(False)
    left = keys(etcd_server, f"{prefix}/job/")
    assert len(left) == 1, left  # a's key is still there: the delete was refused
    election.nominate("b")
    eventually(lambda: election.is_leader("b"), "b never led once a's key could be deleted")
    now = election.get_leader()
    assert now is not None and now.id == "b"
    assert now.epoch > first.epoch, (first, now)  # a new key, not a's inherited
    assert len(keys(etcd_server, f"{prefix}/job/")) == 1  # a's key is gone, b's remains
    coord.close()


QUIET: dict[str, Any] = {"lease_duration": 10, "renew_deadline": 6.0, "retry_period": 4.9, "request_timeout": 2.0}
"""No keep-alive for ~5 s after connect: the proxy's ``hold(after=1)`` catches the put."""


def test_a_key_put_by_a_nominate_whose_answer_was_lost_does_not_lead_forever(
    etcd_server: EtcdCluster, proxies: list[ThreadedFaultProxy]
) -> None:
    proxy = proxies[0]
    prefix, coord, election = _election(proxy, QUIET)
    proxy.hold("down", after=1)  # the put reaches etcd; its answer waits
    try:
        election.nominate("a")
    except kubecoord.errors.CoordinationError:
        pass
    else:
        raise AssertionError("the nominate whose answer was held did not raise")
    proxy.heal()
    other = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **LONG_LEASE)
    rival = other.leader_election("job")
    rival.nominate("b")
    # a's key lives on coord's lease, which coord keeps alive: only its delete lets b lead.
    eventually(lambda: rival.is_leader("b"), "the key of a's failed nominate leads while coord lives")
    assert len(keys(etcd_server, f"{prefix}/job/")) == 1  # b's alone
    other.close()
    coord.close()


def test_a_candidate_whose_re_entry_put_failed_enters_again(etcd_server: EtcdCluster) -> None:
    prefix = f"wd-{uuid.uuid4().hex[:8]}"
    coord = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **LONG_LEASE)
    election = coord.leader_election("job")
    assert election.nominate("a")
    transport = election._context.transport  # type: ignore[attr-defined]
    call, refused = transport.call, threading.Event()

    def refusing(path: str, body: Any, **kwargs: Any) -> Any:
        if path == "kv/txn" and not refused.is_set():
            refused.set()
            raise kubecoord.errors.BackendUnavailableError("etcd out of reach for the re-entry's put")
        return call(path, body, **kwargs)

    transport.call = refusing
    etcdctl(etcd_server, "del", keys(etcd_server, f"{prefix}/job/")[0])  # a re-enters; its put fails
    eventually(refused.is_set, "a never re-entered")
    eventually(lambda: election.is_leader("a") and len(keys(etcd_server, f"{prefix}/job/")) == 1,
               "a never entered again once etcd answered")
    coord.close()
