"""A leave() whose delete could not reach etcd raised: the member's key is still there, on
the coordinator's live lease. The leave can be sent again, and once etcd answers the member
is gone. Judged by etcd: the keys etcdctl lists."""

from __future__ import annotations

import uuid

import pytest

import kubecoord
from kubecoord.errors import CoordinationError
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.etcd import EtcdCluster

from .etcdctl import keys
from .test_withdrawn_keys import LONG_LEASE


def test_a_leave_that_raised_can_be_sent_again(etcd_server: EtcdCluster, proxies: list[ThreadedFaultProxy]) -> None:
    prefix = f"lv-{uuid.uuid4().hex[:8]}"
    proxy = proxies[0]
    coord = kubecoord.connect(f"etcd://{proxy.address}/{prefix}", **LONG_LEASE)
    group = coord.group_membership("workers")
    group.join("w1")
    proxy.refuse()
    proxy.cut()
    with pytest.raises(CoordinationError):
        group.leave("w1")  # its delete cannot reach etcd
    proxy.refuse(False)
    assert len(keys(etcd_server, f"{prefix}/_kubecoord/groups/workers/")) == 1  # w1 is still a member
    group.leave("w1")
    assert keys(etcd_server, f"{prefix}/_kubecoord/groups/workers/") == []
    coord.close()
