"""``backend: etcd`` with the operator running against the API emulator and a real etcd:
status mirrored from etcd as for Cassandra and ZooKeeper, keys purged by the finalizer,
credentials from the Secret ``spec.etcd.secretName`` (an etcd with authentication on),
an unusable Secret shown as Ready=False with what is wrong, and a client that binds by
name reaching etcd through the same Secret."""

from __future__ import annotations

import base64
import pathlib
from typing import Any

import kubernetes
import pytest

import kubecoord
from kubecoord.wire import object_names
from kubecoord_testkit.servers.etcd import EtcdCluster
from tests.fixtures.etcd import ETCD_ROOT_PASSWORD
from tests.helpers import eventually
from tests.operator.conftest import FAST, NAMESPACE, Resources


def _spec(etcd: EtcdCluster, prefix: str, **settings: Any) -> dict[str, Any]:
    return {"backend": "etcd", "etcd": {"hosts": etcd.hosts.split(","), "prefix": prefix, "sessionTimeoutSeconds": 3,
                                        **settings}}


def _secret(resources: Resources, name: str, **values: str) -> None:
    data = {key.replace("_", "."): base64.b64encode(value.encode()).decode() for key, value in values.items()}
    resources.core.create_namespaced_secret(
        NAMESPACE, kubernetes.client.V1Secret(metadata=kubernetes.client.V1ObjectMeta(name=name), data=data)
    )


def _ready_message(resources: Resources, plural: str, name: str) -> str:
    conditions = resources.status(plural, name).get("conditions") or []
    return next((f"{c['status']}: {c['message']}" for c in conditions if c["type"] == "Ready"), "")


def test_etcd_resources_are_mirrored_and_their_keys_purged_on_delete(
    resources: Resources, unique: str, etcd_server: EtcdCluster
) -> None:
    name, prefix = f"etcd-{unique}", f"op-{unique}"
    spec = _spec(etcd_server, prefix)
    for plural, kind in (("leaderelections", "LeaderElection"), ("kvstores", "KVStore"), ("groups", "Group")):
        resources.create(plural, kind, name, spec)
    resources.wait_ready("leaderelections", name)
    with kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", lease_duration=3) as coordinator:
        coordinator.storage(name).put("topics/orders", "partitions=3")
        eventually(lambda: resources.status("kvstores", name).get("keys") == 1, timeout=20)
        election = coordinator.leader_election(name)
        election.nominate("pod-e", data="host=e")
        eventually(lambda: resources.status("leaderelections", name).get("leader") == "pod-e", timeout=20)
        status = resources.status("leaderelections", name)
        assert status["leaderData"] == "host=e"
        assert status["epoch"] == election.get_leader().epoch  # the leading key's create revision
        members = coordinator.group_membership(name)
        members.join("m-1", data="x")
        eventually(lambda: resources.status("groups", name).get("memberCount") == 1, timeout=20)
        assert object_names.election_lease_name(name) not in resources.lease_names()  # nothing on Kubernetes
        election.close()
        members.close()

        for plural in ("leaderelections", "kvstores", "groups"):
            resources.delete(plural, name)
        for plural in ("leaderelections", "kvstores", "groups"):
            eventually(lambda plural=plural: resources.get(plural, name) is None, timeout=30)  # type: ignore[misc]
        purge = coordinator.purge  # type: ignore[attr-defined]
        assert purge("leader_election", name) == 0 and purge("kv", name) == 0  # the finalizer left nothing
        assert purge("group", name) == 0


def test_etcd_credentials_come_from_the_secret_and_an_unusable_one_is_reported(
    resources: Resources, unique: str, etcd_with_auth: EtcdCluster, kubeconfig_path: pathlib.Path
) -> None:
    name, prefix = f"auth-{unique}", f"auth-{unique}"
    good, wrong, missing = f"etcd-{unique}", f"wrong-{unique}", f"missing-{unique}"
    _secret(resources, good, username="root", password=ETCD_ROOT_PASSWORD)
    _secret(resources, wrong, username="root", password="not-it")
    resources.create("leaderelections", "LeaderElection", name, _spec(etcd_with_auth, prefix, secretName=good))
    resources.create("kvstores", "KVStore", f"{name}-w", _spec(etcd_with_auth, prefix, secretName=wrong))
    resources.create("kvstores", "KVStore", f"{name}-m", _spec(etcd_with_auth, prefix, secretName=missing))
    resources.create("kvstores", "KVStore", f"{name}-n", _spec(etcd_with_auth, prefix))  # no credentials at all
    resources.wait_ready("leaderelections", name)

    eventually(lambda: "False: PermissionDeniedError" in _ready_message(resources, "kvstores", f"{name}-w"), timeout=30)
    eventually(lambda: _ready_message(resources, "kvstores", f"{name}-m") == (
        f"False: InvalidArgumentError: Secret {NAMESPACE}/{missing} (spec.etcd.secretName) does not exist"), timeout=30)
    eventually(lambda: _ready_message(resources, "kvstores", f"{name}-n").startswith("False: "), timeout=30)
    _secret(resources, missing, username="root", password=ETCD_ROOT_PASSWORD)
    resources.wait_ready("kvstores", f"{name}-m")  # retried with backoff: the Secret is read again

    # A kubernetes:// client binds to the resource by name and reaches etcd with the Secret.
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path), **FAST) as client:
        election = client.leader_election(name)
        election.nominate("pod-a")
        eventually(lambda: resources.status("leaderelections", name).get("leader") == "pod-a", timeout=20)
        election.close()
    for plural, resource in (("leaderelections", name), ("kvstores", f"{name}-w"), ("kvstores", f"{name}-m"),
                             ("kvstores", f"{name}-n")):
        resources.delete(plural, resource)
    for plural, resource in (("leaderelections", name), ("kvstores", f"{name}-m")):
        eventually(lambda p=plural, r=resource: resources.get(p, r) is None, timeout=30)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"username": "root"}, "must hold username and password together"),
        ({"ca_crt": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
         "only a TLS connection uses: set tls: true"),
    ],
)
def test_a_secret_the_backend_cannot_use_says_why(
    resources: Resources, unique: str, etcd_server: EtcdCluster, values: dict[str, str], message: str
) -> None:
    name = f"bad-{unique}"
    _secret(resources, name, **values)
    resources.create("leaderelections", "LeaderElection", name, _spec(etcd_server, name, secretName=name))
    eventually(lambda: message in _ready_message(resources, "leaderelections", name), timeout=30)
    assert _ready_message(resources, "leaderelections", name).startswith(
        f"False: InvalidArgumentError: Secret {NAMESPACE}/{name} (spec.etcd.secretName)")
    resources.delete("leaderelections", name)
    eventually(lambda: resources.get("leaderelections", name) is None, timeout=30)
