"""Poison resources among healthy ones, on the whole cluster: the largest names, lists and
Unicode the CRDs accept must neither stall the operator nor keep the healthy resources'
status from following their Leases.

The poison: a LeaderElection, a KVStore and an operator-assigned Group named with 63
characters (the CRDs' limit), each listing 64 clients of 253 characters (the limit), the
Group sharing 4,096 units named with 128 characters, emoji and CJK among them (the limits;
the generation record carries indexes, not names). The healthy: LeaderElections whose leader
changes while the poison is reconciled, each listing a client; they must be Ready and
their status must name each new leader.
"""

from __future__ import annotations

import pathlib
import string
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.fixtures.real_kubernetes import create_namespace, install_crds
from tests.helpers import eventually
from tests.operator.test_controller_real import Api, Operator, _connect

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def namespace(real_admin_api: k8s.ApiClient, real_cluster: RealApiServer) -> str:
    install_crds(real_admin_api)
    return create_namespace(real_admin_api, "poison")


@pytest.fixture(scope="module")
def operator(real_kubeconfig: pathlib.Path, namespace: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    yield from Operator(real_kubeconfig, namespace, tmp_path_factory.mktemp("operator"), "poison-a",
                        ("--allow-unconfined-group-clients",)).serving()


@pytest.fixture(scope="module")
def api(real_admin_api: k8s.ApiClient, namespace: str) -> Api:
    return Api(real_admin_api, namespace)


def _name(prefix: str, length: int) -> str:
    tail = uuid.uuid4().hex
    return (prefix + "-" + (tail * 8))[:length]


def _client(index: int) -> str:
    # a DNS-1123 subdomain of 253 characters: labels of 63 joined by dots
    label = (f"c{index}-" + string.ascii_lowercase * 3)[:63]
    return ".".join([label] * 4)[:253].rstrip(".-")


@pytest.mark.timeout(300)
def test_poison_resources_neither_stall_the_operator_nor_the_healthy_ones(
    operator: Operator, api: Api, real_kubeconfig: pathlib.Path
) -> None:
    clients = [_client(i) for i in range(64)]
    assert all(len(c) >= 250 for c in clients)
    # 128 characters each, a fifth of them outside the BMP and CJK (4,096 of 128 emoji would
    # not fit a request: the API server refuses bodies above 3 MiB)
    units = [f"{i:04d}" + chr(0x1F600 + i % 80) * 12 + chr(0x4E00 + i) * 12 + "u" * 100 for i in range(4096)]
    assert all(len(u) == 128 for u in units)
    poison = {kind: _name(kind.lower()[:2], 63) for kind in ("LeaderElection", "KVStore", "Group")}
    healthy = [f"healthy-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    timings = {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5}
    for name in healthy:
        api.create("LeaderElection", name, {**timings, "clients": ["app"]})
    api.create("LeaderElection", poison["LeaderElection"], {**timings, "clients": clients})
    api.create("KVStore", poison["KVStore"], {"clients": clients})
    api.create("Group", poison["Group"], {"leaseDurationSeconds": 3, "renewIntervalSeconds": 1, "clients": clients,
                                          "assignment": {"unitNames": units, "sessionTimeoutSeconds": 2,
                                                         "rebalanceTimeoutSeconds": 10}})
    # Everything Ready: the namespace's lists the grants are computed from (all three kinds
    # and the RoleBindings) are now large enough for the API server to compress them; the
    # operator read them as undecodable gzip, and no resource with clients there, poison
    # or healthy, got its grants (Ready=False, UnicodeDecodeError).
    for kind, name in [*poison.items(), *(("LeaderElection", n) for n in healthy)]:
        eventually(lambda: api.ready(kind, name), timeout=120, interval=0.5)  # noqa: B023
    with _connect(real_kubeconfig, api.namespace) as side:
        handles = [side.leader_election(name) for name in healthy]
        for turn in range(3):
            for handle, name in zip(handles, healthy, strict=True):
                candidate = f"c{turn}"
                handle.nominate(candidate)
                eventually(lambda: api.status("LeaderElection", name).get("leader") == candidate,  # noqa: B023
                           timeout=30, interval=0.2)
                handle.resign(candidate)
    assert "Traceback" not in operator.text()
