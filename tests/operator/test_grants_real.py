"""The operator's grants and backing objects follow the specs, on the whole cluster (the
real kube-apiserver with kube-controller-manager's garbage collector, ``kubecoord
operator`` as a process, acting ServiceAccounts with tokens of their own):

- a subject added to a resource's RoleBinding behind the operator's back (what a deposed
  replica's late write does) is removed within one resync period, and that ServiceAccount's
  Lease patch is refused afterwards;
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.fixtures.real_kubernetes import MintKubeconfig, create_namespace, install_crds
from tests.helpers import eventually
from tests.operator.test_controller_real import Api, Operator

pytestmark = pytest.mark.slow

RESYNC_SECONDS = 5
"""The operator's --resync-seconds here: a stale grant must go within this (plus a reconcile)."""


@pytest.fixture(scope="module")
def namespace(real_admin_api: k8s.ApiClient, real_cluster: RealApiServer) -> str:
    install_crds(real_admin_api)
    return create_namespace(real_admin_api, "grants")


@pytest.fixture(scope="module")
def operator(real_kubeconfig: pathlib.Path, namespace: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    running = Operator(real_kubeconfig, namespace, tmp_path_factory.mktemp("operator"), "grants-a",
                       ("--resync-seconds", str(RESYNC_SECONDS))).start()
    try:
        yield running
    finally:
        running.stop()
        print(running.text()[-4000:])


@pytest.fixture(scope="module")
def api(real_admin_api: k8s.ApiClient, namespace: str) -> Api:
    return Api(real_admin_api, namespace)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _as(kubeconfig: pathlib.Path) -> k8s.CoordinationV1Api:
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    return k8s.CoordinationV1Api(k8s.ApiClient(configuration))


def _patch_status(leases: k8s.CoordinationV1Api, name: str, namespace: str, holder: str) -> int:
    """The HTTP status of a merge patch of the Lease's holder by that client (200 or 403)."""
    try:
        leases.patch_namespaced_lease(name, namespace, {"spec": {"holderIdentity": holder}})
    except ApiException as error:
        return int(error.status)
    return 200


def _subjects(api: Api, name: str) -> list[str]:
    binding = api.rbac.read_namespaced_role_binding(name, api.namespace)
    return sorted(s.name for s in binding.subjects or [])


@pytest.mark.timeout(240)
def test_a_subject_added_behind_the_operators_back_is_removed_within_a_resync(
    operator: Operator, api: Api, namespace: str, mint_kubeconfig: MintKubeconfig
) -> None:
    name = _unique("stale")
    keeper, victim = f"{name}-keeper", f"{name}-victim"
    as_keeper, as_victim = (_as(mint_kubeconfig(namespace, account)) for account in (keeper, victim))
    api.create("LeaderElection", name, {"clients": [keeper]})
    eventually(lambda: api.ready("LeaderElection", name), timeout=60, interval=0.3)
    binding = f"kubecoord-leaderelection-{name}"
    assert _subjects(api, binding) == [keeper]
    assert _patch_status(as_victim, name, namespace, victim) == 403
    # The deposed replica's late write: the RoleBinding binds victim again.
    body: dict[str, Any] = {"subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}
                                         for account in (keeper, victim)]}
    api.rbac.patch_namespaced_role_binding(binding, namespace, body)
    eventually(lambda: _patch_status(as_victim, name, namespace, victim) == 200, timeout=30, interval=0.2)
    # Gone within the resync (generous deadline: a reconcile on a busy machine comes on top).
    eventually(lambda: _subjects(api, binding) == [keeper], timeout=RESYNC_SECONDS * 6, interval=0.2)
    eventually(lambda: _patch_status(as_victim, name, namespace, victim) == 403, timeout=30, interval=0.2)
    assert _patch_status(as_keeper, name, namespace, keeper) == 200
    assert "grants differ from the spec" in operator.text()
