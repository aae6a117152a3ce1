"""Fencing tokens and epochs never go backwards on kubernetes://, whatever is done to the
Lease by hand, on the emulator and on the real kube-apiserver: every acquisition reserves
its epoch in the Lease ``NAME.epoch`` (the high-water mark) before it writes the Lease.

Each test checks the property the issue found broken: a lock's tokens went 1, 2, 3 -> 1
for the same Lock object when its Lease was edited or deleted while the lock was free."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from typing import Any

import pytest
from kubernetes import client as k8s

import kubecoord
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST


def _options(cluster: Cluster) -> dict[str, Any]:
    return {"kubeconfig": str(cluster.admin_kubeconfig), **FAST}


def _leases(cluster: Cluster) -> k8s.CoordinationV1Api:
    return k8s.CoordinationV1Api(cluster.admin_api)


def _tamper(cluster: Cluster, name: str, how: str) -> None:
    """What a hand does to the Lease: edit its epoch down, clear its holder (``free``), delete
    it, or delete it and create it again as a fresh Lease (kubectl apply of a manifest) at 0
    or far above every epoch issued (``recreate-high``)."""
    if how == "edit":
        _leases(cluster).patch_namespaced_lease(name, cluster.namespace, {"spec": {"leaseTransitions": 0}})
        return
    if how == "free":
        _leases(cluster).patch_namespaced_lease(name, cluster.namespace, {"spec": {"holderIdentity": None}})
        return
    _leases(cluster).delete_namespaced_lease(name, cluster.namespace)
    if how.startswith("recreate"):
        transitions = 1000 if how == "recreate-high" else 0
        _leases(cluster).create_namespaced_lease(
            cluster.namespace, {"metadata": {"name": name}, "spec": {"leaseTransitions": transitions}}
        )


def _three_tokens(lock: kubecoord.Lock) -> list[int]:
    tokens = []
    for _ in range(3):
        assert lock.acquire(timeout=30)
        assert lock.token is not None
        tokens.append(lock.token)
        lock.release()
    return tokens


@pytest.mark.parametrize("how", ["edit", "delete", "recreate"])
def test_a_free_locks_next_token_is_above_every_earlier_one(cluster: Cluster, how: str) -> None:
    name = f"hwm-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(cluster.url, **_options(cluster)) as coord:
        lock = coord.lock(name, id="pod-a")
        tokens = _three_tokens(lock)
        assert tokens == sorted(set(tokens))
        _tamper(cluster, name, how)
        # The same Lock object ...
        assert lock.acquire(timeout=30)
        assert lock.token is not None and lock.token > tokens[-1]
        tokens.append(lock.token)
        lock.release()
        _tamper(cluster, name, how)
    # ... and another process, which never saw the Lease: above them all.
    with kubecoord.connect(cluster.url, **_options(cluster)) as other, other.lock(name, id="pod-b") as held:
        assert held.token is not None and held.token > tokens[-1]


def _only_one_holds(first: kubecoord.Lock, second: kubecoord.Lock, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert not (first.is_held() and second.is_held())
        time.sleep(0.02)


@pytest.mark.parametrize("how", ["delete", "recreate", "recreate-high", "free", "taken"])
def test_a_held_locks_lease_tampered_with(cluster: Cluster, how: str) -> None:
    """The holder keeps holding (its renewal puts the deleted Lease back, as client-go's
    does) or learns it lost at its next renewal; no other process holds beside it, and the
    next token is above the holder's."""
    name = f"hwm-{uuid.uuid4().hex[:8]}"
    with (
        kubecoord.connect(cluster.url, **_options(cluster)) as first,
        kubecoord.connect(cluster.url, **_options(cluster)) as second,
    ):
        holder = first.lock(name, id="pod-a")
        assert holder.acquire(timeout=30)
        token = holder.token
        assert token is not None
        if how == "taken":
            _leases(cluster).patch_namespaced_lease(
                name, cluster.namespace, {"spec": {"holderIdentity": "intruder", "leaseTransitions": 0}}
            )
            eventually(lambda: not holder.is_held(), timeout=2 * FAST["renew_deadline"] + 5)
        else:
            _tamper(cluster, name, how)
        # A process that never saw the Lease starts waiting now ...
        waiter = second.lock(name, id="pod-b")
        attempt: list[bool] = []
        thread = threading.Thread(target=lambda: attempt.append(waiter.acquire(timeout=60)))
        thread.start()
        try:
            # ... and never holds beside the holder, for longer than a lease.
            _only_one_holds(holder, waiter, 2 * FAST["lease_duration"])
            if holder.is_held():
                holder.release()
            thread.join(70)
            assert attempt == [True]
            assert waiter.token is not None and waiter.token > token
        finally:
            thread.join(70)
            waiter.close()
            holder.close()


def test_the_mark_is_a_lease_of_its_own(cluster: Cluster) -> None:
    name = f"hwm-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(cluster.url, **_options(cluster)) as coord:
        tokens = _three_tokens(coord.lock(name, id="pod-a"))
    mark = cluster.lease(f"{name}.epoch")
    assert mark is not None
    assert mark["spec"]["leaseTransitions"] == tokens[-1]
    assert not mark["spec"].get("holderIdentity")


_ONE_HOLD = """
import sys, kubecoord
url, kubeconfig, name, holder = sys.argv[1:]
with kubecoord.connect(url, kubeconfig=kubeconfig, lease_duration=3.0, renew_deadline=2.5, retry_period=0.5) as c:
    with c.lock(name, id=holder) as lock:
        print(lock.token)
"""


def _token_in_a_process(cluster: Cluster, name: str, holder: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _ONE_HOLD, cluster.url, str(cluster.admin_kubeconfig), name, holder],
        capture_output=True, text=True, timeout=120, check=True,
    )
    return int(done.stdout.strip())


@pytest.mark.parametrize("how", ["edit", "delete", "recreate"])
def test_tokens_of_processes_one_after_another_increase(cluster: Cluster, how: str) -> None:
    """Each process starts afresh (nothing remembered in memory): only the mark carries the
    epoch from one to the next across the Lease's edit, deletion or re-creation."""
    name = f"hwm-{uuid.uuid4().hex[:8]}"
    first = _token_in_a_process(cluster, name, "pod-a")
    second = _token_in_a_process(cluster, name, "pod-b")
    _tamper(cluster, name, how)
    third = _token_in_a_process(cluster, name, "pod-c")
    assert first < second < third
