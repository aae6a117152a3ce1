"""Fixtures of the zookeeper tests: a plain kazoo client on the session's server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from kubecoord_testkit.servers.zookeeper import ZooKeeperServer


@pytest.fixture
def zk(zookeeper_server: ZooKeeperServer) -> Iterator[KazooClient]:
    """kazoo itself, to look at the znodes or to run kazoo's own recipes next to ours."""
    client = KazooClient(hosts=zookeeper_server.hosts, timeout=4.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()
