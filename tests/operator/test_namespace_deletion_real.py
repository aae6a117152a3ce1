"""Deleting a namespace that holds hundreds of kubecoord resources, on the whole cluster:
the namespace goes (nothing the operator does holds it up or puts objects back into it),
and the operator keeps serving the resources of another namespace it watches.

240 resources — 160 LeaderElections, 40 Groups, 40 KVStores, each with a client — are
Ready before the namespace is deleted; a LeaderElection in a second namespace changes
leader while it is deleted and its status must follow.
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.fixtures.real_kubernetes import create_namespace, install_crds
from tests.helpers import eventually
from tests.operator.test_controller_real import GROUP, PLURALS, VERSION, Api, Operator, _connect

pytestmark = pytest.mark.slow

COUNTS = {"LeaderElection": 160, "Group": 40, "KVStore": 40}


@pytest.fixture(scope="module")
def namespaces(real_admin_api: k8s.ApiClient, real_cluster: RealApiServer) -> tuple[str, str]:
    install_crds(real_admin_api)
    return create_namespace(real_admin_api, "doomed"), create_namespace(real_admin_api, "kept")


@pytest.fixture(scope="module")
def operator(real_kubeconfig: pathlib.Path, namespaces: tuple[str, str],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    doomed, kept = namespaces  # both watched; its Lease in the kept one
    yield from Operator(real_kubeconfig, kept, tmp_path_factory.mktemp("operator"), "nsdel-a",
                        ("--namespace", doomed, "--allow-unconfined-group-clients")).serving()


def _count_ready(custom: k8s.CustomObjectsApi, namespace: str) -> int:
    ready = 0
    for plural in PLURALS.values():
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]:
            conditions = (item.get("status") or {}).get("conditions") or []
            ready += any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return ready


@pytest.mark.timeout(600)
def test_a_namespace_of_hundreds_of_resources_deletes_and_the_others_are_served(
    operator: Operator, namespaces: tuple[str, str], real_admin_api: k8s.ApiClient, real_kubeconfig: pathlib.Path
) -> None:
    doomed, kept = namespaces
    api = Api(real_admin_api, doomed)
    for kind, count in COUNTS.items():
        for index in range(count):
            api.create(kind, f"{kind.lower()}-{index}", {"clients": ["app"]})
    eventually(lambda: _count_ready(api.custom, doomed) == sum(COUNTS.values()), timeout=300, interval=2)
    survivor = Api(real_admin_api, kept)
    name = f"kept-{uuid.uuid4().hex[:6]}"
    survivor.create("LeaderElection", name, {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2,
                                             "retryPeriodSeconds": 0.5, "clients": ["app"]})
    eventually(lambda: survivor.ready("LeaderElection", name), timeout=60, interval=0.3)
    api.core.delete_namespace(doomed)

    def gone() -> bool:
        try:
            api.core.read_namespace(doomed)
        except ApiException as error:
            if error.status == 404:
                return True
            raise
        return False

    with _connect(real_kubeconfig, kept) as side:
        election = side.leader_election(name)
        for turn in range(3):
            candidate = f"c{turn}"
            election.nominate(candidate)
            eventually(lambda: survivor.status("LeaderElection", name).get("leader") == candidate,  # noqa: B023
                       timeout=30, interval=0.2)
            election.resign(candidate)
    eventually(gone, timeout=240, interval=1)
    assert operator.process is not None and operator.process.poll() is None
    assert "Traceback" not in operator.text()
