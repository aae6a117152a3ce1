"""Clients bind by name: a kubernetes:// handle takes its backend and timings from the
kubecoord.dev resource of the same name, and the connect() options without one."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator

import kubernetes.client
import pytest
from kopf.testing import KopfRunner

import kubecoord
from kubecoord.api import Coordinator
from kubecoord.errors import BackendUnavailableError, PermissionDeniedError, StoreFullError
from kubecoord.wire import object_names
from kubecoord_testkit.emulator import ApiEmulator
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually
from tests.operator.conftest import NAMESPACE


@pytest.fixture
def coord(k8s: kubernetes.client.ApiClient, kubeconfig_path: pathlib.Path) -> Iterator[Coordinator]:
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path)) as coordinator:
        yield coordinator


def _create(k8s: kubernetes.client.ApiClient, plural: str, kind: str, name: str, spec: dict[str, object]) -> None:
    body = {"apiVersion": "kubecoord.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    kubernetes.client.CustomObjectsApi(k8s).create_namespaced_custom_object(
        "kubecoord.dev", "v1alpha1", NAMESPACE, plural, body
    )


def _lease_seconds(k8s: kubernetes.client.ApiClient, name: str) -> int:
    lease = kubernetes.client.CoordinationV1Api(k8s).read_namespaced_lease(name, NAMESPACE)
    return int(lease.spec.lease_duration_seconds)


def test_election_takes_timings_from_its_resource_and_defaults_without(
    k8s: kubernetes.client.ApiClient, coord: Coordinator, operator: KopfRunner
) -> None:
    bound, unbound = f"bound-{uuid.uuid4().hex[:6]}", f"free-{uuid.uuid4().hex[:6]}"
    _create(k8s, "leaderelections", "LeaderElection", bound, {"leaseDurationSeconds": 7, "renewDeadlineSeconds": 5})
    election = coord.leader_election(bound)
    election.nominate("pod-a")  # its Lease is the operator's to create: a bound client waits for it
    eventually(lambda: election.is_leader("pod-a"), timeout=20)
    assert coord.leader_election(unbound).nominate("pod-a")
    assert _lease_seconds(k8s, object_names.election_lease_name(bound)) == 7
    assert _lease_seconds(k8s, object_names.election_lease_name(unbound)) == 15  # client-go's default


def test_group_members_live_as_long_as_their_resource_says(
    k8s: kubernetes.client.ApiClient, coord: Coordinator
) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    _create(k8s, "groups", "Group", group, {"leaseDurationSeconds": 4, "renewIntervalSeconds": 1})
    coord.group_membership(group).join("w1")
    assert _lease_seconds(k8s, object_names.member_lease_name(group, "w1")) == 4


def test_store_refuses_writes_beyond_its_size_limit(k8s: kubernetes.client.ApiClient, coord: Coordinator) -> None:
    store = f"kv-{uuid.uuid4().hex[:6]}"
    _create(k8s, "kvstores", "KVStore", store, {"sizeLimit": "1Ki"})
    kv = coord.storage(store)
    kv.put("small", "x" * 100)
    with pytest.raises(StoreFullError, match="sizeLimit"):
        kv.put("large", "x" * 2000)
    assert kv.fetch("large").result() is None


def test_a_zookeeper_resource_hands_out_zookeeper_handles(
    k8s: kubernetes.client.ApiClient, coord: Coordinator, zookeeper_server: ZooKeeperServer
) -> None:
    name, chroot = f"zk-{uuid.uuid4().hex[:6]}", f"bind-{uuid.uuid4().hex[:6]}"
    spec = {"backend": "zookeeper", "zookeeper": {"hosts": [zookeeper_server.hosts], "chroot": f"/{chroot}"}}
    _create(k8s, "leaderelections", "LeaderElection", name, spec)
    election = coord.leader_election(name)
    assert election.nominate("pod-a")
    with kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}") as direct:
        leader = direct.leader_election(name).get_leader()
        assert leader is not None and leader.id == "pod-a"
    assert object_names.election_lease_name(name) not in {
        lease.metadata.name for lease in kubernetes.client.CoordinationV1Api(k8s).list_namespaced_lease(NAMESPACE).items
    }


def _outsider(api: ApiEmulator, k8s: kubernetes.client.ApiClient, directory: pathlib.Path) -> pathlib.Path:
    """A ServiceAccount that may use every Lease of the namespace but may not read kubecoord resources."""
    account = f"outsider-{uuid.uuid4().hex[:6]}"
    rbac = kubernetes.client.RbacAuthorizationV1Api(k8s)
    rbac.create_namespaced_role(NAMESPACE, {"metadata": {"name": account}, "rules": [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}]})
    rbac.create_namespaced_role_binding(NAMESPACE, {
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
    })
    token = api.token_for_service_account(NAMESPACE, account)
    return api.write_kubeconfig(directory / account, token=token, namespace=NAMESPACE)


def test_a_resource_it_may_not_read_is_an_error_not_a_fallback_to_defaults(
    api_emulator: ApiEmulator, k8s: kubernetes.client.ApiClient, tmp_path: pathlib.Path
) -> None:
    name = f"denied-{uuid.uuid4().hex[:6]}"
    _create(k8s, "leaderelections", "LeaderElection", name, {"leaseDurationSeconds": 7, "renewDeadlineSeconds": 5})
    config = _outsider(api_emulator, k8s, tmp_path)
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(config)) as coordinator:
        with pytest.raises(PermissionDeniedError, match="leaderelections"):
            coordinator.leader_election(name)
        with pytest.raises(PermissionDeniedError):
            coordinator.storage(name)
    leases = kubernetes.client.CoordinationV1Api(k8s).list_namespaced_lease(NAMESPACE).items
    # Nothing written by the client: the Lease, if there, is the operator's, never held.
    lease = next((item for item in leases if item.metadata.name == object_names.election_lease_name(name)), None)
    assert lease is None or not lease.spec.holder_identity


def test_a_resource_that_cannot_be_read_in_time_is_backend_unavailable(
    api_emulator: ApiEmulator, kubeconfig_path: pathlib.Path
) -> None:
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path),
                           request_timeout=0.5) as coordinator:
        api_emulator.hang()
        try:
            with pytest.raises(BackendUnavailableError):
                coordinator.leader_election(f"slow-{uuid.uuid4().hex[:6]}")
        finally:
            api_emulator.hang(False)
