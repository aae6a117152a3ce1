"""Every resource's life cycle with the operator running against the API emulator:
backing objects with ownerReferences, status mirrored from the live backend, Events,
expired-member GC, Role/RoleBinding from spec.clients, and nothing left after delete."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time
from typing import Any

import kubernetes
import pytest

import kubecoord
from kubecoord.api import Coordinator
from kubecoord.errors import PermissionDeniedError
from kubecoord.wire import object_names
from kubecoord_testkit.emulator import ApiEmulator
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually
from tests.operator.conftest import FAST, NAMESPACE, Resources


def _owners(obj: Any) -> list[str]:
    return [owner.kind for owner in obj.metadata.owner_references or []]


def test_leader_election_lifecycle(resources: Resources, client: Coordinator, unique: str) -> None:
    name = f"billing-{unique}"
    resources.create("leaderelections", "LeaderElection", name, {"clients": ["billing"]})
    resources.wait_ready("leaderelections", name)
    lease = resources.coordination.read_namespaced_lease(object_names.election_lease_name(name), NAMESPACE)
    assert _owners(lease) == ["LeaderElection"]
    assert resources.condition("leaderelections", name, "BackendReachable") == "True"

    election = client.leader_election(name)
    election.nominate("pod-a", data="host=a")
    eventually(lambda: resources.status("leaderelections", name).get("leader") == "pod-a", timeout=20)
    status = resources.status("leaderelections", name)
    assert status["leaderData"] == "host=a" and status["epoch"] >= 1
    eventually(lambda: bool(resources.status("leaderelections", name).get("renewTime")))
    eventually(lambda: ("LeaderElected", f"pod-a leads with epoch {status['epoch']}") in resources.events(name))

    election.nominate("pod-b")
    election.resign("pod-a")
    eventually(lambda: resources.status("leaderelections", name).get("leader") == "pod-b", timeout=20)
    assert resources.status("leaderelections", name)["epoch"] > status["epoch"]
    election.close()

    resources.delete("leaderelections", name)
    eventually(lambda: resources.get("leaderelections", name) is None, timeout=30)
    eventually(lambda: object_names.election_lease_name(name) not in resources.lease_names(), timeout=30)
    eventually(lambda: f"kubecoord-leaderelection-{name}" not in resources.role_names(), timeout=30)


def test_a_deleted_election_lease_comes_back_as_it_was_and_epochs_never_go_back(
    resources: Resources, kubeconfig_path: pathlib.Path, unique: str
) -> None:
    name = f"deleted-{unique}"
    lease_name = object_names.election_lease_name(name)
    spec = {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5}
    resources.create("leaderelections", "LeaderElection", name, spec)
    resources.wait_ready("leaderelections", name)
    url = f"kubernetes://{NAMESPACE}"
    with kubecoord.connect(url, kubeconfig=str(kubeconfig_path)) as holder_side:
        election = holder_side.leader_election(name)
        assert election.nominate("pod-a")
        election.nominate("pod-b")
        election.resign("pod-a")
        eventually(lambda: election.is_leader("pod-b"), timeout=20)
        epoch = resources.coordination.read_namespaced_lease(lease_name, NAMESPACE).spec.lease_transitions
        assert epoch >= 2
        resources.coordination.delete_namespaced_lease(lease_name, NAMESPACE)
        # A process started after the deletion never saw the Lease: it must not create it
        # (it would start over at epoch 1) but wait for the operator's re-creation.
        with kubecoord.connect(url, kubeconfig=str(kubeconfig_path)) as newcomer_side:
            newcomer = newcomer_side.leader_election(name)
            newcomer.nominate("pod-new")

            eventually(lambda: lease_name in resources.lease_names(), timeout=20)
            lease = resources.coordination.read_namespaced_lease(lease_name, NAMESPACE)
            # As it was: same holder, same epoch; the holder renews it and keeps leading.
            assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("pod-b", epoch)
            assert _owners(lease) == ["LeaderElection"]
            eventually(lambda: election.get_leader() == kubecoord.Leader("pod-b", "", epoch), timeout=10)
            assert election.is_leader("pod-b")
            election.resign("pod-b")
            eventually(lambda: newcomer.is_leader("pod-new"), timeout=20)
            assert newcomer.get_leader() == kubecoord.Leader("pod-new", "", epoch + 1)
    resources.delete("leaderelections", name)


def test_an_elections_epochs_go_on_above_its_mark_after_its_lease_is_recreated_by_someone_else(
    resources: Resources, kubeconfig_path: pathlib.Path, unique: str
) -> None:
    """The operator creates the mark NAME.epoch with the Lease; a Lease deleted and created
    again by someone else (foreign: NotOwned, never adopted) at epoch 0 before the
    operator's re-creation does not make the next leader's epoch start again at 1."""
    name = f"mark-{unique}"
    lease_name = object_names.election_lease_name(name)
    spec = {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5}
    resources.create("leaderelections", "LeaderElection", name, spec)
    resources.wait_ready("leaderelections", name)
    mark = resources.coordination.read_namespaced_lease(object_names.epoch_lease_name(lease_name), NAMESPACE)
    assert _owners(mark) == ["LeaderElection"] and not mark.spec.holder_identity
    url = f"kubernetes://{NAMESPACE}"
    issued = []
    for holder in ("pod-a", "pod-b"):
        with kubecoord.connect(url, kubeconfig=str(kubeconfig_path)) as side:
            election = side.leader_election(name)
            assert election.nominate(holder)
            leader = election.get_leader()
            assert leader is not None
            issued.append(leader.epoch)
    assert issued[0] < issued[1]
    resources.coordination.delete_namespaced_lease(lease_name, NAMESPACE)
    try:
        resources.coordination.create_namespaced_lease(
            NAMESPACE, {"metadata": {"name": lease_name}, "spec": {"leaseTransitions": 0}})
    except kubernetes.client.exceptions.ApiException as error:
        if error.status != 409:  # the operator came first: edit its re-creation down instead
            raise
        resources.coordination.patch_namespaced_lease(lease_name, NAMESPACE, {"spec": {"leaseTransitions": 0}})
    with kubecoord.connect(url, kubeconfig=str(kubeconfig_path)) as newcomer_side:
        newcomer = newcomer_side.leader_election(name)
        newcomer.nominate("pod-c")
        eventually(lambda: newcomer.is_leader("pod-c"), timeout=30)
        leader = newcomer.get_leader()
        assert leader is not None and leader.epoch > max(issued), (leader, issued)
    resources.delete("leaderelections", name)
    eventually(lambda: object_names.epoch_lease_name(lease_name) not in resources.lease_names(), timeout=30)


def test_group_status_generation_events_and_expired_member_gc(
    resources: Resources, client: Coordinator, unique: str, kubeconfig_path: pathlib.Path
) -> None:
    name = f"workers-{unique}"
    resources.create("groups", "Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5})
    resources.wait_ready("groups", name)
    group = client.group_membership(name)
    group.join("w1", data="host=1")
    group.join("w2", data="host=2")
    eventually(lambda: resources.status("groups", name).get("memberCount") == 2, timeout=20)
    status = resources.status("groups", name)
    assert status["members"] == [{"id": "w1", "data": "host=1"}, {"id": "w2", "data": "host=2"}]
    assert status["generation"] == 2
    group.leave("w1")
    eventually(lambda: resources.status("groups", name).get("generation") == 3, timeout=20)
    eventually(lambda: ("MemberLeft", "w1 left") in resources.events(name))

    # A member whose process dies (kill -9) stops renewing: it expires, and the operator
    # deletes its Lease and says so.
    member = _spawn_member(kubeconfig_path, name, "w3")
    try:
        eventually(lambda: resources.status("groups", name).get("memberCount") == 2, timeout=30)
        member.kill()
    finally:
        member.kill()
        member.wait()
    lease = object_names.member_lease_name(name, "w3")
    eventually(lambda: lease not in resources.lease_names(), timeout=40)
    eventually(lambda: resources.status("groups", name).get("memberCount") == 1, timeout=20)
    # The Event is posted after the status write that dropped the member: wait for it too.
    eventually(lambda: any(reason == "MemberExpired" and "w3" in message for reason, message in resources.events(name)))
    assert resources.status("groups", name)["generation"] == 5  # joined w1, w2; left w1; joined, expired w3

    resources.delete("groups", name)
    eventually(lambda: resources.get("groups", name) is None, timeout=30)
    eventually(lambda: object_names.member_lease_name(name, "w2") not in resources.lease_names(), timeout=30)


def _spawn_member(kubeconfig_path: pathlib.Path, group: str, member: str) -> subprocess.Popen[bytes]:
    code = (
        "import sys, time, kubecoord\n"
        f"c = kubecoord.connect('kubernetes://{NAMESPACE}', kubeconfig={str(kubeconfig_path)!r}, "
        "lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)\n"
        f"c.group_membership({group!r}).join({member!r})\n"
        "time.sleep(600)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code])


def test_kvstore_status_follows_writes_and_delete_leaves_nothing(
    resources: Resources, client: Coordinator, unique: str
) -> None:
    name = f"topics-{unique}"
    resources.create("kvstores", "KVStore", name, {"sizeLimit": "1Ki"})
    resources.wait_ready("kvstores", name)
    configmap = object_names.store_configmap_name(name)
    assert _owners(resources.core.read_namespaced_config_map(configmap, NAMESPACE)) == ["KVStore"]
    kv = client.storage(name)
    kv.put("topics/orders", "partitions=3")
    kv.put("topics/payments", "partitions=6")
    eventually(lambda: resources.status("kvstores", name).get("keys") == 2, timeout=20)
    expected = sum(
        len(k) + len(v) for k, v in {"topics/orders": "partitions=3", "topics/payments": "partitions=6"}.items()
    )
    assert resources.status("kvstores", name)["bytes"] == expected
    kv.update("topics/orders", "partitions=12")
    eventually(lambda: resources.status("kvstores", name).get("bytes") == expected + 1, timeout=20)

    resources.delete("kvstores", name)
    eventually(lambda: resources.get("kvstores", name) is None, timeout=30)
    eventually(lambda: configmap not in resources.configmap_names(), timeout=30)


def test_ready_waits_for_the_clients_role(resources: Resources, api: ApiEmulator, unique: str) -> None:
    """A client that waits for Ready and then connects must find its RoleBinding: the status
    controller runs beside the reconcile handler, so Ready waits for the reconcile. The Role's
    create is refused twice (kopf retries the handler), which leaves seconds of Ready=True
    without a Role when the controller does not wait."""
    name = f"ready-{unique}"
    role = f"kubecoord-leaderelection-{name}"
    api.fail("create", "roles", code=503, times=2)
    resources.create("leaderelections", "LeaderElection", name, {"clients": [f"app-{unique}"]})
    ready_without_role = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready = resources.condition("leaderelections", name, "Ready") == "True"
        has_role = role in resources.role_names()
        if ready and not has_role:
            ready_without_role.append(resources.status("leaderelections", name).get("conditions"))
        if ready and has_role:
            break
        time.sleep(0.05)
    assert not ready_without_role, ready_without_role[0]
    assert resources.condition("leaderelections", name, "Ready") == "True"
    assert api.pending_faults() == 0


def test_clients_get_exactly_their_role_and_others_are_denied(
    resources: Resources, api: ApiEmulator, unique: str, tmp_path: pathlib.Path
) -> None:
    name = f"rbac-{unique}"
    resources.core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": f"allowed-{unique}"}})
    resources.create("leaderelections", "LeaderElection", name, {"clients": [f"allowed-{unique}"]})
    resources.wait_ready("leaderelections", name)
    role = resources.rbac.read_namespaced_role(f"kubecoord-leaderelection-{name}", NAMESPACE)
    rules = {(tuple(r.resources), tuple(r.resource_names or ())): sorted(r.verbs) for r in role.rules}
    assert rules == {
        (("leaderelections",), (name,)): ["get"],
        (("leases",), (object_names.election_lease_name(name), f"{name}.epoch")):
            ["get", "list", "patch", "update", "watch"],
    }
    binding = resources.rbac.read_namespaced_role_binding(f"kubecoord-leaderelection-{name}", NAMESPACE)
    assert [(s.kind, s.name) for s in binding.subjects] == [("ServiceAccount", f"allowed-{unique}")]

    allowed = api.write_kubeconfig(
        tmp_path / "allowed", namespace=NAMESPACE, token=api.token_for_service_account(NAMESPACE, f"allowed-{unique}")
    )
    denied = api.write_kubeconfig(
        tmp_path / "denied", namespace=NAMESPACE, token=api.token_for_service_account(NAMESPACE, f"other-{unique}")
    )
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(allowed), **FAST) as coordinator:
        assert coordinator.leader_election(name).nominate("pod-a")
    with (
        kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(denied), **FAST) as coordinator,
        pytest.raises(PermissionDeniedError),
    ):
        coordinator.leader_election(name).nominate("pod-x")

    resources.custom.patch_namespaced_custom_object(
        "kubecoord.dev", "v1alpha1", NAMESPACE, "leaderelections", name, {"spec": {"clients": []}}
    )
    eventually(lambda: f"kubecoord-leaderelection-{name}" not in resources.role_names(), timeout=30)
    resources.delete("leaderelections", name)


def test_a_lock_is_granted_by_the_leader_election_of_its_name(
    resources: Resources, api: ApiEmulator, unique: str, tmp_path: pathlib.Path
) -> None:
    """No Lock kind: a lock is held through the election record of its name, so the
    LeaderElection of that name grants it (RBAC by name, the Lease made by the operator)
    and mirrors its holder and token."""
    name = f"lock-{unique}"
    resources.core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": f"locker-{unique}"}})
    resources.create("leaderelections", "LeaderElection", name, {"clients": [f"locker-{unique}"]})
    resources.wait_ready("leaderelections", name)
    allowed = api.write_kubeconfig(
        tmp_path / "allowed", namespace=NAMESPACE, token=api.token_for_service_account(NAMESPACE, f"locker-{unique}")
    )
    denied = api.write_kubeconfig(
        tmp_path / "denied", namespace=NAMESPACE, token=api.token_for_service_account(NAMESPACE, f"other-{unique}")
    )
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(allowed), **FAST) as coordinator:
        lock = coordinator.lock(name, id="pod-a")
        assert lock.acquire(timeout=30)
        token = lock.token
        eventually(lambda: resources.status("leaderelections", name).get("leader") == "pod-a", timeout=30)
        assert resources.status("leaderelections", name).get("epoch") == token
        lock.release()
    with (
        kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(denied), **FAST) as coordinator,
        pytest.raises(PermissionDeniedError),
    ):
        coordinator.lock(name, id="pod-x").acquire(timeout=5)
    resources.delete("leaderelections", name)


def test_cassandra_resources_are_mirrored_and_their_rows_purged_on_delete(
    resources: Resources, unique: str, cassandra_keyspace: str
) -> None:
    name = f"cs-{unique}"
    hosts, keyspace = cassandra_keyspace.split("//")[1].split("/")
    spec = {"backend": "cassandra", "cassandra": {"hosts": hosts.split(","), "keyspace": keyspace}}
    resources.create("leaderelections", "LeaderElection", name, spec)
    resources.create("kvstores", "KVStore", name, spec)
    resources.wait_ready("leaderelections", name)
    with kubecoord.connect(cassandra_keyspace) as coordinator:
        coordinator.storage(name).put("topics/orders", "partitions=3")
        eventually(lambda: resources.status("kvstores", name).get("keys") == 1, timeout=20)
        election = coordinator.leader_election(name)
        election.nominate("pod-c")
        eventually(lambda: resources.status("leaderelections", name).get("leader") == "pod-c", timeout=20)
        assert object_names.election_lease_name(name) not in resources.lease_names()  # nothing on Kubernetes
        election.close()

        resources.delete("leaderelections", name)
        resources.delete("kvstores", name)
        eventually(lambda: resources.get("leaderelections", name) is None, timeout=30)
        eventually(lambda: resources.get("kvstores", name) is None, timeout=30)
        purge = coordinator.purge  # type: ignore[attr-defined]
        assert purge("leader_election", name) == 0 and purge("kv", name) == 0  # the finalizer left nothing


def test_zookeeper_resources_are_mirrored_and_their_znodes_purged_on_delete(
    resources: Resources, unique: str, zookeeper_server: ZooKeeperServer
) -> None:
    name, chroot = f"zk-{unique}", f"op-{unique}"
    spec = {"backend": "zookeeper", "zookeeper": {"hosts": [zookeeper_server.hosts], "chroot": f"/{chroot}"}}
    resources.create("leaderelections", "LeaderElection", name, spec)
    resources.create("kvstores", "KVStore", name, spec)
    resources.wait_ready("leaderelections", name)
    with kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}") as coordinator:
        coordinator.storage(name).put("topics/orders", "partitions=3")
        eventually(lambda: resources.status("kvstores", name).get("keys") == 1, timeout=20)
        election = coordinator.leader_election(name)
        election.nominate("pod-z")
        eventually(lambda: resources.status("leaderelections", name).get("leader") == "pod-z", timeout=20)
        assert object_names.election_lease_name(name) not in resources.lease_names()  # nothing on Kubernetes
        election.close()

        resources.delete("leaderelections", name)
        resources.delete("kvstores", name)
        eventually(lambda: resources.get("leaderelections", name) is None, timeout=30)
        eventually(lambda: resources.get("kvstores", name) is None, timeout=30)
        purge = coordinator.purge  # type: ignore[attr-defined]
        assert purge("leader_election", name) == 0 and purge("kv", name) == 0  # the finalizer left nothing


def test_a_change_after_the_deletion_mark_does_not_block_the_finalizer(
    resources: Resources, unique: str, zookeeper_server: ZooKeeperServer, api: ApiEmulator
) -> None:
    """A resource changed after its deletionTimestamp (a status write that was in flight,
    another controller's label or finalizer) has a newer resourceVersion than the final
    body the deletion event carried: the finalizer's removal, a merge patch with the
    version as precondition, must use the newest one. It used the first, and answered 409
    on every retry, forever (the zookeeper lifecycle test failed so in a full run)."""
    name, chroot = f"zkmod-{unique}", f"op-{unique}"
    spec = {"backend": "zookeeper", "zookeeper": {"hosts": [zookeeper_server.hosts], "chroot": f"/{chroot}"}}
    resources.create("leaderelections", "LeaderElection", name, spec)
    resources.wait_ready("leaderelections", name)
    group, version = "kubecoord.dev", "v1alpha1"
    hold = "tests.kubecoord.dev/hold"  # keeps the object readable once the operator let go
    resources.custom.patch_namespaced_custom_object(
        group, version, NAMESPACE, "leaderelections", name,
        {"metadata": {"finalizers": [*resources.get("leaderelections", name)["metadata"]["finalizers"], hold]}})
    api.fail("patch", "leaderelections", code=503, times=3)  # the operator's first tries: 0.5 + 1 + 2 s of backoff
    resources.delete("leaderelections", name)
    marked = resources.get("leaderelections", name)
    assert marked is not None and marked["metadata"].get("deletionTimestamp")
    marked["metadata"].setdefault("labels", {})["changed"] = "after"  # a change after the deletion mark (a PUT:
    resources.custom.replace_namespaced_custom_object(  # the injected faults are the operator's patches')
        group, version, NAMESPACE, "leaderelections", name, marked)
    eventually(lambda: resources.get("leaderelections", name)["metadata"]["finalizers"] == [hold],  # type: ignore[index]
               timeout=30, interval=0.2)
    resources.custom.patch_namespaced_custom_object(
        group, version, NAMESPACE, "leaderelections", name, {"metadata": {"finalizers": None}})
    eventually(lambda: resources.get("leaderelections", name) is None, timeout=10)
