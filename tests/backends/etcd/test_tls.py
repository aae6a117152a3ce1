"""etcd over https with client certificates (``--client-cert-auth``), as a production etcd
runs: the ``tls`` option's CA and client certificate reach it for every primitive, and a
client without the certificate, or that does not trust the server's CA, gets a typed
kubecoord error from connect() or its first request — never a library exception, and
nothing written."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import kubecoord
from kubecoord.errors import CoordinationError
from kubecoord_testkit.servers.etcd import EtcdCluster


@pytest.fixture(scope="module")
def etcd_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    root: pathlib.Path = tmp_path_factory.mktemp("etcd-tls")
    with EtcdCluster.single(root, tls=True) as etcd:
        yield etcd


def test_every_primitive_works_over_https_with_a_client_certificate(etcd_tls: EtcdCluster) -> None:
    url = f"etcd://{etcd_tls.hosts}/tls-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(url, tls=etcd_tls.client_tls, lease_duration=3) as coordinator:
        store = coordinator.storage("s")
        store.put("k", "v")
        assert store.fetch("k").result(timeout=10) == "v"
        assert coordinator.leader_election("e").nominate("a")
        members = coordinator.group_membership("g")
        members.join("m1")
        assert "m1" in members.membership_list()
        lock = coordinator.lock("l")
        assert lock.acquire(timeout=10)
        lock.release()


@pytest.mark.parametrize("case", ["no client certificate", "server's CA not trusted", "plain http"])
def test_a_client_the_server_refuses_or_does_not_trust_gets_a_typed_error_and_writes_nothing(
    etcd_tls: EtcdCluster, case: str,
) -> None:
    prefix = f"tls-{uuid.uuid4().hex[:8]}"
    url = f"etcd://{etcd_tls.hosts}/{prefix}"
    options: dict[str, Any] = {
        "no client certificate": {"tls": {"ca_file": etcd_tls.client_tls["ca_file"]}},
        "server's CA not trusted": {"tls": {k: v for k, v in etcd_tls.client_tls.items() if k != "ca_file"}},
        "plain http": {},
    }[case]
    with (
        pytest.raises(CoordinationError),
        kubecoord.connect(url, lease_duration=3, request_timeout=5, **options) as coordinator,
    ):
        coordinator.storage("s").put("k", "v")
    with kubecoord.connect(url, tls=etcd_tls.client_tls, lease_duration=3) as coordinator:
        assert coordinator.storage("s").fetch("k").result(timeout=10) is None
