"""kubecoord.capabilities.StateCache on the kubernetes backend (namespace_state.py): an
observer reads any election, group or store from the namespace's shared watches, with no
handle, and reads what the handles read — on the emulator and the real kube-apiserver.

The operator computes every resource's status this way; a difference here would be a
status that disagrees with what the clients see."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import kubecoord
from kubecoord import UnsupportedFeatureError
from kubecoord.capabilities import StateCache, require
from kubecoord.testing import crash
from kubecoord.wire import object_names
from tests.helpers import eventually

from .clusters import Cluster
from .conftest import FAST


def _observer(cluster: Cluster) -> Any:
    return kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), watch_scope="managed",
                             bind_resources=False, **FAST)


def test_reads_agree_with_the_handles(cluster: Cluster) -> None:
    tag = uuid.uuid4().hex[:8]
    options: dict[str, Any] = {"kubeconfig": str(cluster.admin_kubeconfig), **FAST}
    with _observer(cluster) as observer, kubecoord.connect(cluster.url, kv_shards=4, **options) as client:
        cache = require(observer, StateCache)
        assert cache.caches_namespace()
        changes: list[tuple[str, str]] = []
        stop = cache.watch_objects(lambda plural, name, old, new: changes.append((plural, name)))

        election = client.leader_election(f"svc-{tag}")
        assert election.nominate("c1", data="payload")
        eventually(lambda: cache.cached_leader(f"svc-{tag}") == election.get_leader(), timeout=10)
        assert cache.cached_leader(f"svc-{tag}").id == "c1"  # type: ignore[union-attr]
        assert cache.cached_leader(f"nothing-{tag}") is None

        group = client.group_membership(f"grp-{tag}")
        group.join("w1", data="a")
        group.join("w2", data="b")
        eventually(lambda: cache.cached_members(f"grp-{tag}")[0] == {"w1": "a", "w2": "b"}, timeout=10)
        members, due = cache.cached_members(f"grp-{tag}")
        assert members == group.membership()
        assert due is not None and 0 <= due <= FAST["lease_duration"]
        assert cache.cached_members(f"nothing-{tag}") == ({}, None)

        storage = client.storage(f"kv-{tag}")
        written = {f"k{i}": f"v{i}" * i for i in range(12)} | {"a/b/c": "deep", "a": "top"}
        for key, value in written.items():
            storage.put(key, value)
        eventually(lambda: cache.cached_entries(f"kv-{tag}") == written, timeout=10)  # across the 4 shards
        assert cache.cached_entries(f"nothing-{tag}") == {}

        # Every object's events were delivered, with their kind.
        assert ("leases", f"svc-{tag}") in changes
        assert ("leases", object_names.member_lease_name(f"grp-{tag}", "w1")) in changes
        assert ("configmaps", object_names.store_shard_name(f"kv-{tag}", 0)) in changes
        stop()
        seen = len(changes)
        storage.put("after", "stop")
        eventually(lambda: "after" in cache.cached_entries(f"kv-{tag}"), timeout=10)
        assert len(changes) == seen  # unsubscribed: no further calls
        election.close()
        group.close()


def test_an_expired_member_is_out_and_reaped_only_when_asked(cluster: Cluster) -> None:
    tag = uuid.uuid4().hex[:8]
    with _observer(cluster) as observer:
        cache = require(observer, StateCache)
        member = kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), **FAST)
        member.group_membership(f"grp-{tag}").join("doomed", data="x")
        eventually(lambda: cache.cached_members(f"grp-{tag}")[0] == {"doomed": "x"}, timeout=10)
        crash(member)
        # Out once its lease passed in the observer's own view, its Lease left in place...
        eventually(lambda: cache.cached_members(f"grp-{tag}") == ({}, None), timeout=10, interval=0.1)
        lease = object_names.member_lease_name(f"grp-{tag}", "doomed")
        assert observer.observed("leases", lease) is not None  # type: ignore[attr-defined]
        # ...until the observer reaps (over the version it judged).
        assert cache.cached_members(f"grp-{tag}", reap=True) == ({}, None)
        eventually(lambda: observer.observed("leases", lease) is None, timeout=10)  # type: ignore[attr-defined]


def test_the_object_scope_has_no_namespace_reads(cluster: Cluster) -> None:
    with kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), **FAST) as client:
        cache = require(client, StateCache)
        assert not cache.caches_namespace()
        with pytest.raises(UnsupportedFeatureError):
            cache.cached_leader("anything")
