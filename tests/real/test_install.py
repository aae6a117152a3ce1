"""The install path a new user takes, on the real kube-apiserver:

1. ``helm install`` of charts/kubecoord (the Makefile's helm) into a release namespace, on
   a whole cluster: the operator Deployment becomes Available and its pod Running (on a
   hollow node: no container runs);
2. ``kubecoord operator`` as that pod's process: a host process named after the pod, with
   a token of the chart's ServiceAccount bound to the pod and the chart's arguments;
3. a LeaderElection, a Group and a KVStore whose ``spec.clients`` lists ServiceAccount
   ``app``; applications authenticating as ``app`` use all three;
4. ServiceAccount ``intruder`` (not listed) gets PermissionDeniedError and writes nothing;
5. deleting the resources and ``helm uninstall`` finish, and leave nothing behind.

The cluster's garbage collector removes what carries an ownerReference to a deleted
resource: "nothing behind" means nothing of kubecoord's without an owner, and nothing left
of the deleted resources once the collector has run. The example app runs as a Deployment
whose pods the cluster schedules; each pod's process is a host process with the pod's name
and a token bound to it.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import kubecoord
from kubecoord import PermissionDeniedError
from kubecoord.group_coordinator import UnitsProtocol, decode_units
from kubecoord.operator import lease_grants
from kubecoord_testkit import processes
from kubecoord_testkit.servers.kubernetes import RealApiServer
from kubecoord_testkit.servers.managed import free_port
from tests.chart import conftest as chart_fixtures
from tests.chart.conftest import CHART, run_helm
from tests.fixtures import real_kubernetes
from tests.fixtures.real_kubernetes import MintKubeconfig, create_namespace, running_pods
from tests.helpers import eventually
from tests.real.own_cluster import real_admin_api, real_api

pytestmark = pytest.mark.slow

GROUP, VERSION = "kubecoord.dev", "v1alpha1"
KINDS = {"LeaderElection": "leaderelections", "Group": "groups", "KVStore": "kvstores"}
TIMINGS = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 1.0}
RELEASE = "kc"

helm = chart_fixtures.helm  # the Makefile's helm (installed from its pinned wheel when missing)


# The install path starts on a cluster of its own: other modules create the CRDs without
# Helm's ownership metadata, which `helm install` rightly refuses to adopt. real_api and
# real_admin_api (tests/real/own_cluster.py) and mint_kubeconfig override the session
# fixtures (the testkit plugin's, tests/fixtures/real_kubernetes.py's) for this module.
__all__ = ["real_admin_api", "real_api"]


@pytest.fixture(scope="module")
def mint_kubeconfig(
    real_api: RealApiServer, real_admin_api: k8s.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> MintKubeconfig:
    return real_kubernetes.minter(real_api, real_admin_api, tmp_path_factory.mktemp("sa-kubeconfigs"))


@pytest.fixture(scope="module")
def release_namespace(real_admin_api: k8s.ApiClient) -> str:
    return create_namespace(real_admin_api, "kubecoord-system")


@pytest.fixture(scope="module")
def installed(helm: pathlib.Path, real_api: RealApiServer, release_namespace: str) -> Iterator[str]:
    """The chart, installed (``--wait``: on a whole cluster its Deployment becomes Available);
    uninstalled at the end (the test of uninstall checks what it leaves)."""
    wait = ["--wait"] if real_api.cluster else []
    result = run_helm(helm, "install", RELEASE, str(CHART), "--namespace", release_namespace,
                      "--kubeconfig", str(real_api.admin_kubeconfig), "--timeout", "120s", *wait)
    assert result.returncode == 0, result.stderr
    yield RELEASE
    run_helm(helm, "uninstall", RELEASE, "--namespace", release_namespace,
             "--kubeconfig", str(real_api.admin_kubeconfig), "--timeout", "60s")


@dataclass
class Operator:
    process: subprocess.Popen[bytes]
    log: pathlib.Path
    health_port: int

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def operator_process(installed: str, release_namespace: str, mint_kubeconfig: MintKubeconfig,
                     real_api: RealApiServer, real_admin_api: k8s.ApiClient,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """``kubecoord operator`` as the chart's Deployment runs it, with its ServiceAccount's token."""
    account = f"{RELEASE}-kubecoord"
    pod = None
    if real_api.cluster:  # the Deployment's pods exist (2 replicas): one's process gets its name and a bound token
        pod = running_pods(real_admin_api, release_namespace, f"app.kubernetes.io/instance={RELEASE}", 2)[0]
    kubeconfig = mint_kubeconfig(release_namespace, account, create=False, pod=pod)
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    health_port = free_port()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kubecoord.cli", "--log-level", "INFO", "operator", "--all-namespaces",
             "--kubeconfig", str(kubeconfig), "--confinement-policy", "kubecoord-lease-grants",
             "--confinement-binding", f"{RELEASE}-kubecoord-lease-grants",
             "--lease-namespace", release_namespace, "--identity", pod or "operator-0", "--fence-writes",
             "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1",
             "--health-port", str(health_port), "--metrics-port", "0", "--bind", "127.0.0.1"],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        yield Operator(process, log, health_port)
    finally:
        processes.stop(process, 30)
        print(log.read_text(errors="replace")[-4000:])


def _resource(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}


def _ready(custom: k8s.CustomObjectsApi, namespace: str, kind: str, name: str) -> bool:
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, KINDS[kind], name)
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _granted(rbac: k8s.RbacAuthorizationV1Api, namespace: str, kind: str, name: str) -> bool:
    try:
        binding = rbac.read_namespaced_role_binding(f"kubecoord-{kind.lower()}-{name}", namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return bool(binding.subjects)


@pytest.fixture(scope="module")
def resources(operator_process: Operator, real_admin_api: k8s.ApiClient, real_namespace: str) -> dict[str, str]:
    names = {kind: f"{kind.lower()}-{uuid.uuid4().hex[:6]}" for kind in KINDS}
    specs = {
        "LeaderElection": {"leaseDurationSeconds": 4, "renewDeadlineSeconds": 3, "retryPeriodSeconds": 1},
        "Group": {"leaseDurationSeconds": 4, "renewIntervalSeconds": 1},
        "KVStore": {"sizeLimit": "64Ki"},
    }
    for kind, name in names.items():
        _create_and_wait(operator_process, real_admin_api, real_namespace, kind, name, specs[kind])
    return names


def _create_and_wait(operator: Operator, admin: k8s.ApiClient, namespace: str, kind: str, name: str,
                     spec: dict[str, Any], clients: tuple[str, ...] = ("app",)) -> None:
    custom, rbac = k8s.CustomObjectsApi(admin), k8s.RbacAuthorizationV1Api(admin)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, KINDS[kind],
                                           _resource(kind, name, {**spec, "clients": list(clients)}))

    def ready() -> bool:
        assert operator.process.poll() is None, "the operator exited"
        return _ready(custom, namespace, kind, name) and _granted(rbac, namespace, kind, name)

    eventually(ready, timeout=90, interval=0.2)


def _status(admin: k8s.ApiClient, namespace: str, kind: str, name: str) -> dict[str, Any]:
    body = k8s.CustomObjectsApi(admin).get_namespaced_custom_object(GROUP, VERSION, namespace, KINDS[kind], name)
    return dict(body.get("status") or {})


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), None)


def _connect(kubeconfig: pathlib.Path, namespace: str) -> kubecoord.Coordinator:
    return kubecoord.connect(f"kubernetes://{namespace}", kubeconfig=str(kubeconfig), **TIMINGS)


def test_an_app_listed_in_spec_clients_uses_all_three(
    resources: dict[str, str], real_namespace: str, mint_kubeconfig: MintKubeconfig
) -> None:
    first, second = mint_kubeconfig(real_namespace, "app"), mint_kubeconfig(real_namespace, "app")
    with _connect(first, real_namespace) as a, _connect(second, real_namespace) as b:
        election_a = a.leader_election(resources["LeaderElection"])
        election_b = b.leader_election(resources["LeaderElection"])
        assert election_a.nominate("pod-a")
        assert not election_b.nominate("pod-b")
        leader = election_b.get_leader()
        assert leader is not None and leader.id == "pod-a"
        election_a.resign("pod-a")
        eventually(lambda: election_b.is_leader("pod-b"), timeout=15)

        group_a = a.group_membership(resources["Group"])
        group_b = b.group_membership(resources["Group"])
        group_a.join("w1", data="host=a")
        group_b.join("w2", data="host=b")
        eventually(lambda: group_a.membership() == {"w1": "host=a", "w2": "host=b"}, timeout=15)
        group_b.leave("w2")
        eventually(lambda: group_a.membership_list() == {"w1"}, timeout=15)

        kv_a = a.storage(resources["KVStore"])
        kv_b = b.storage(resources["KVStore"])
        assert kv_a.put("topics/orders", "partitions=3") == 1
        current = kv_b.fetch_versioned("topics/orders").result(10)
        assert current is not None and current.value == "partitions=3"
        assert kv_b.update("topics/orders", "partitions=6", expected_version=current.version) == 2
        eventually(lambda: kv_a.fetch("topics/orders").result(10) == "partitions=6", timeout=15)
        assert kv_a.children("topics") == {"orders"}
        kv_a.delete("topics/orders")


def test_an_unlisted_service_account_is_denied_and_writes_nothing(
    resources: dict[str, str], real_api: RealApiServer, real_namespace: str, mint_kubeconfig: MintKubeconfig
) -> None:
    since = real_api.audit_mark()
    with _connect(mint_kubeconfig(real_namespace, "intruder"), real_namespace) as coordinator:
        attempts = {
            "nominate": lambda: coordinator.leader_election(resources["LeaderElection"]).nominate("x"),
            "join": lambda: coordinator.group_membership(resources["Group"]).join("x"),
            "put": lambda: coordinator.storage(resources["KVStore"]).put("k", "v"),
            "fetch": lambda: coordinator.storage(resources["KVStore"]).fetch("k").result(10),
        }
        for what, attempt in attempts.items():
            with pytest.raises(PermissionDeniedError):
                attempt()
                pytest.fail(f"{what} succeeded")
    time.sleep(0.5)  # the audit log is written as requests complete
    user = f"system:serviceaccount:{real_namespace}:intruder"
    accepted = [w for w in real_api.writes(user=user, since=since) if w["code"] and int(str(w["code"])) < 300]
    assert accepted == []


def _can_i(kubectl: pathlib.Path, real_api: RealApiServer, user: str, namespace: str, *request: str) -> bool:
    done = subprocess.run([str(kubectl), "--kubeconfig", str(real_api.admin_kubeconfig), "auth", "can-i", *request,
                           "--namespace", namespace, "--as", user], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


FOREIGN = {
    "ConfigMap": ("v1", {"data": {"owner": "someone-else"}}),
    "Lease": ("coordination.k8s.io/v1", {"spec": {"holderIdentity": "someone-else"}}),
    "Role": ("rbac.authorization.k8s.io/v1", {"rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", {
        # A Role whose rules the operator holds: RBAC refuses a binding to anything more
        # before admission is asked.
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "someone-elses-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "someone-else"}]}),
}
"""What another application keeps in a namespace the operator watches (no kubecoord label)."""


def test_the_operators_account_may_not_write_what_is_not_kubecoords(
    operator_process: Operator, resources: dict[str, str], installed: str, release_namespace: str,
    real_api: RealApiServer, real_admin_api: k8s.ApiClient, real_namespace: str, mint_kubeconfig: MintKubeconfig,
    kubectl: pathlib.Path,
) -> None:
    """RBAC cannot narrow the operator's Lease, ConfigMap, Role and RoleBinding writes (names
    follow the resources'; create has no name), so `kubectl auth can-i` says yes to them;
    the chart's policy on the operator's writes refuses each real request on another
    application's object, and nothing of it changes. What RBAC does narrow, can-i refuses."""
    from kubernetes.dynamic import DynamicClient

    account = f"{RELEASE}-kubecoord"
    user = f"system:serviceaccount:{release_namespace}:{account}"
    for request in (("update", "configmaps/someone-else"), ("delete", "leases/someone-else"),
                    ("patch", "roles/someone-else"), ("create", "rolebindings")):
        assert _can_i(kubectl, real_api, user, real_namespace, *request), request  # RBAC alone: yes
    for request in (("update", "roles"), ("update", "rolebindings"), ("deletecollection", "configmaps"),
                    ("deletecollection", "leases"), ("escalate", "roles"), ("bind", "roles"), ("list", "secrets"),
                    ("watch", "secrets"), ("create", "secrets"),
                    ("update", "leaderelections.kubecoord.dev"), ("update", "groups.kubecoord.dev/status"),
                    ("create", "pods"), ("patch", "deployments.apps")):
        assert not _can_i(kubectl, real_api, user, real_namespace, *request), request  # narrowed by RBAC
    admin = DynamicClient(real_admin_api)
    operator_api = kubernetes.config.new_client_from_config(
        config_file=str(mint_kubeconfig(release_namespace, account, create=False)))
    as_operator = DynamicClient(operator_api)
    suffix = uuid.uuid4().hex[:6]
    k8s.RbacAuthorizationV1Api(real_admin_api).create_namespaced_role(real_namespace, {
        "metadata": {"name": "someone-elses-role"}, "rules": FOREIGN["Role"][1]["rules"]})
    since = real_api.audit_mark()
    for kind, (api_version, fields) in FOREIGN.items():
        name = f"someone-else-{suffix}"
        body = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **fields}
        theirs = admin.resources.get(api_version=api_version, kind=kind)
        ours = as_operator.resources.get(api_version=api_version, kind=kind)
        theirs.create(body=body, namespace=real_namespace)
        before = theirs.get(name=name, namespace=real_namespace).to_dict()
        relabel = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "kubecoord"}}}
        writes = {
            "create": functools.partial(ours.create, body={**body, "metadata": {"name": f"{name}-new"}},
                                        namespace=real_namespace),
            "patch": functools.partial(ours.patch, name=name, namespace=real_namespace, body=relabel,
                                       content_type="application/merge-patch+json"),
            "update": functools.partial(ours.replace, name=name, namespace=real_namespace, body=before),
            "delete": functools.partial(ours.delete, name=name, namespace=real_namespace),
        }
        for verb, write in writes.items():
            with pytest.raises(ApiException) as refused:
                write()
            assert refused.value.status == 403, (kind, verb, refused.value.body)
            message = json.loads(refused.value.body)["message"]
            if kind in ("Role", "RoleBinding") and verb == "update":  # never PUT by the operator: not in its RBAC
                assert f'cannot update resource "{kind.lower()}s"' in message, (kind, verb, message)
            else:
                assert f"ValidatingAdmissionPolicy '{RELEASE}-kubecoord-operator-writes'" in message, (kind, verb,
                                                                                                       message)
        after = theirs.get(name=name, namespace=real_namespace).to_dict()
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], kind  # untouched
        theirs.delete(name=name, namespace=real_namespace)
    time.sleep(0.5)  # the audit log is written as requests complete
    applied = [w for w in real_api.writes(user=user, since=since)
               if w["code"] and int(str(w["code"])) < 300 and str(w["name"]).startswith("someone-else")]
    assert applied == []
    operator_api.close()
    assert operator_process.process.poll() is None


def _lease_grants(admin: k8s.ApiClient, namespace: str) -> dict[str, str]:
    try:
        return dict(k8s.CoreV1Api(admin).read_namespaced_config_map(lease_grants.CONFIGMAP, namespace).data or {})
    except ApiException as error:
        if error.status == 404:
            return {}
        raise


def test_a_group_client_writes_only_the_leases_of_its_own_resources(
    operator_process: Operator, resources: dict[str, str], real_api: RealApiServer, real_admin_api: k8s.ApiClient,
    real_namespace: str, mint_kubeconfig: MintKubeconfig,
) -> None:
    """RBAC grants a Group's clients every Lease of the namespace (create cannot be limited by
    name); the chart's ValidatingAdmissionPolicy, fed by the operator's kubecoord-lease-grants
    ConfigMap, confines their writes to their own resources' Leases."""
    suffix = uuid.uuid4().hex[:6]
    other_group, other_election, unrelated = f"team-b-{suffix}", f"team-b-el-{suffix}", f"go-app-{suffix}"
    _create_and_wait(operator_process, real_admin_api, real_namespace, "Group", other_group,
                     {"leaseDurationSeconds": 4, "renewIntervalSeconds": 1}, clients=("team-b",))
    _create_and_wait(operator_process, real_admin_api, real_namespace, "LeaderElection", other_election,
                     {"leaseDurationSeconds": 4, "renewDeadlineSeconds": 3, "retryPeriodSeconds": 1},
                     clients=("team-b",))
    leases = k8s.CoordinationV1Api(real_admin_api)
    leases.create_namespaced_lease(real_namespace, {"metadata": {"name": unrelated}, "spec": {}})  # free to take
    own = resources["Group"]
    eventually(lambda: _lease_grants(real_admin_api, real_namespace).get("team-b") is not None, timeout=30)
    grants = _lease_grants(real_admin_api, real_namespace)
    election = resources["LeaderElection"]
    assert set(grants["app"].split()) == {f"{own}.m.*", f"{own}-gc", f"{own}-gc.epoch", election, f"{election}.epoch"}
    # Reading the other team's resources is harmless; granted here so that the client's
    # writes reach their Leases and the admission policy is what answers.
    rbac = k8s.RbacAuthorizationV1Api(real_admin_api)
    reader = {"metadata": {"name": f"app-reads-{suffix}"}}
    rbac.create_namespaced_role(real_namespace, {**reader, "rules": [
        {"apiGroups": [GROUP], "resources": ["groups", "leaderelections"], "verbs": ["get"]}]})
    rbac.create_namespaced_role_binding(real_namespace, {
        **reader,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": reader["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": real_namespace}]})
    config = mint_kubeconfig(real_namespace, "app")
    since = real_api.audit_mark()
    with _connect(config, real_namespace) as coordinator:
        attempts = {
            "another group's member Lease": lambda: coordinator.group_membership(other_group).join("intruder"),
            "another election's Lease": lambda: coordinator.leader_election(other_election).nominate("intruder"),
            "an unrelated Lease": lambda: coordinator.leader_election(unrelated).nominate("intruder"),
        }
        for what, attempt in attempts.items():
            with pytest.raises(PermissionDeniedError, match="may write only the Leases of its kubecoord"):
                attempt()
                pytest.fail(f"{what}: written")
        app_api = k8s.CoordinationV1Api(kubernetes.config.new_client_from_config(config_file=str(config)))
        with pytest.raises(ApiException) as denied:
            app_api.delete_namespaced_lease(unrelated, real_namespace)
        assert denied.value.status == 403

        # Its own group: join, heartbeats, leave, and the group coordinator (NAME-gc election).
        group = coordinator.group_membership(own)
        group.join("own-1", data="x")
        (member_lease,) = [lease for lease in leases.list_namespaced_lease(
            real_namespace, label_selector=f"kubecoord.dev/group={own}").items
            if lease.metadata.annotations.get("kubecoord.dev/member-id") == "own-1"]
        first = member_lease.spec.renew_time
        eventually(lambda: leases.read_namespaced_lease(member_lease.metadata.name, real_namespace).spec.renew_time
                   != first, timeout=15)
        group.leave("own-1")
        member = coordinator.group_coordinator(own, UnitsProtocol(["u0", "u1"]), member_id="gc-1",
                                               session_timeout=4.0)
        member.join(timeout=60)
        eventually(member.is_stable, timeout=60)
        assert sorted(decode_units(member.assignment or b"")[0]) == ["u0", "u1"]
        member.leave()
    time.sleep(0.5)  # the audit log is written as requests complete
    user = f"system:serviceaccount:{real_namespace}:app"
    written = {w["name"] for w in real_api.writes(user=user, since=since)
               if w["resource"] == "leases" and w["code"] and int(str(w["code"])) < 300}
    assert not {n for n in written if str(n).startswith(f"{other_group}.")} | (written & {other_election, unrelated})
    assert f"{own}-gc" in written


def test_a_same_named_lease_it_did_not_create_is_left_alone_and_reported(
    operator_process: Operator, real_admin_api: k8s.ApiClient, real_namespace: str
) -> None:
    """A client-go application's Lease with the resource's name: not adopted, relabelled or deleted."""
    name = f"foreign-{uuid.uuid4().hex[:6]}"
    leases = k8s.CoordinationV1Api(real_admin_api)
    leases.create_namespaced_lease(real_namespace, {
        "metadata": {"name": name, "labels": {"app": "go-controller"}},
        "spec": {"holderIdentity": "go-controller-0", "leaseDurationSeconds": 15, "leaseTransitions": 3},
    })
    before = real_admin_api.sanitize_for_serialization(leases.read_namespaced_lease(name, real_namespace))
    k8s.CustomObjectsApi(real_admin_api).create_namespaced_custom_object(
        GROUP, VERSION, real_namespace, "leaderelections", _resource("LeaderElection", name, {"clients": ["app"]}))

    def reported() -> bool:
        condition = _condition(_status(real_admin_api, real_namespace, "LeaderElection", name), "BackingObjects")
        return condition is not None and condition["status"] == "False" and condition["reason"] == "NotOwned"

    eventually(reported, timeout=60, interval=0.2)
    # Not Ready, and its clients are granted nothing on the Lease that is not its own.
    ready = _condition(_status(real_admin_api, real_namespace, "LeaderElection", name), "Ready")
    assert ready is not None and ready["status"] == "False" and ready["reason"] == "NotOwned"
    rbac = k8s.RbacAuthorizationV1Api(real_admin_api)
    eventually(lambda: _granted(rbac, real_namespace, "LeaderElection", name), timeout=30, interval=0.2)
    role = rbac.read_namespaced_role(f"kubecoord-leaderelection-{name}", real_namespace)
    assert not [rule for rule in role.rules if "leases" in rule.resources], role.rules
    after = real_admin_api.sanitize_for_serialization(leases.read_namespaced_lease(name, real_namespace))
    assert after["metadata"].get("ownerReferences") is None
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["spec"]["holderIdentity"] == "go-controller-0"
    k8s.CustomObjectsApi(real_admin_api).delete_namespaced_custom_object(
        GROUP, VERSION, real_namespace, "leaderelections", name)
    eventually(lambda: not _exists(real_admin_api, real_namespace, "LeaderElection", name), timeout=30)
    kept = real_admin_api.sanitize_for_serialization(leases.read_namespaced_lease(name, real_namespace))
    assert kept["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]  # not even touched


def _exists(admin: k8s.ApiClient, namespace: str, kind: str, name: str) -> bool:
    try:
        k8s.CustomObjectsApi(admin).get_namespaced_custom_object(GROUP, VERSION, namespace, KINDS[kind], name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_a_deleted_lease_is_recreated_and_epochs_never_go_backwards(
    operator_process: Operator, real_admin_api: k8s.ApiClient, real_namespace: str, mint_kubeconfig: MintKubeconfig
) -> None:
    name = f"drift-{uuid.uuid4().hex[:6]}"
    _create_and_wait(operator_process, real_admin_api, real_namespace, "LeaderElection", name,
                     {"leaseDurationSeconds": 4, "renewDeadlineSeconds": 3, "retryPeriodSeconds": 1})
    config = mint_kubeconfig(real_namespace, "app")
    epochs = []
    for candidate in ("a", "b"):
        with _connect(config, real_namespace) as coordinator:
            election = coordinator.leader_election(name)
            assert election.nominate(candidate)
            leader = election.get_leader()
            assert leader is not None
            epochs.append(leader.epoch)
            eventually(lambda: _status(real_admin_api, real_namespace, "LeaderElection", name).get("epoch")
                       == epochs[-1], timeout=30, interval=0.2)
    leases = k8s.CoordinationV1Api(real_admin_api)
    leases.delete_namespaced_lease(name, real_namespace)

    def recreated() -> bool:
        try:
            lease = leases.read_namespaced_lease(name, real_namespace)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return bool(lease.metadata.owner_references)

    eventually(recreated, timeout=60, interval=0.3)  # drift repair (no client may create it)
    with _connect(config, real_namespace) as coordinator:
        election = coordinator.leader_election(name)
        assert election.nominate("c")
        leader = election.get_leader()
        assert leader is not None
        assert leader.epoch > max(epochs), (epochs, leader.epoch)
    k8s.CustomObjectsApi(real_admin_api).delete_namespaced_custom_object(
        GROUP, VERSION, real_namespace, "leaderelections", name)
    eventually(lambda: not _exists(real_admin_api, real_namespace, "LeaderElection", name), timeout=30)


def test_a_spec_edit_takes_effect_before_observed_generation_advances(
    resources: dict[str, str], real_admin_api: k8s.ApiClient, real_namespace: str, mint_kubeconfig: MintKubeconfig
) -> None:
    name = resources["KVStore"]
    custom = k8s.CustomObjectsApi(real_admin_api)
    edited = custom.patch_namespaced_custom_object(GROUP, VERSION, real_namespace, "kvstores", name,
                                                   {"spec": {"sizeLimit": "128Ki"}})
    generation = edited["metadata"]["generation"]
    with _connect(mint_kubeconfig(real_namespace, "app"), real_namespace) as coordinator:
        coordinator.storage(name).put(f"wake/{uuid.uuid4().hex[:6]}", "x")  # a change for the mirror to see

    def observed() -> bool:
        status = _status(real_admin_api, real_namespace, "KVStore", name)
        if status.get("observedGeneration") != generation:
            return False
        assert status["sizeLimitBytes"] == 128 * 1024, status  # the new spec is the one in use
        return True

    eventually(observed, timeout=60, interval=0.2)


def test_a_group_too_large_to_list_in_status_still_gets_its_status(
    operator_process: Operator, real_admin_api: k8s.ApiClient, real_namespace: str, mint_kubeconfig: MintKubeconfig
) -> None:
    """30 members with 60 KiB of data each: listed whole, the status would pass the object
    size limit and every status write would fail (the daemon used to crash on it)."""
    name = f"big-{uuid.uuid4().hex[:6]}"
    _create_and_wait(operator_process, real_admin_api, real_namespace, "Group", name,
                     {"leaseDurationSeconds": 15, "renewIntervalSeconds": 5})
    data = "x" * 60 * 1024
    with _connect(mint_kubeconfig(real_namespace, "app"), real_namespace) as coordinator:
        group = coordinator.group_membership(name)
        for index in range(30):
            group.join(f"m{index:02d}", data=data)

        def listed() -> bool:
            status = _status(real_admin_api, real_namespace, "Group", name)
            return status.get("memberCount") == 30

        eventually(listed, timeout=60, interval=0.3)
        status = _status(real_admin_api, real_namespace, "Group", name)
        assert 0 < len(status["members"]) < 30
        assert _condition(status, "Ready") is not None
    assert operator_process.process.poll() is None
    k8s.CustomObjectsApi(real_admin_api).delete_namespaced_custom_object(GROUP, VERSION, real_namespace, "groups", name)


def test_the_operator_logs_one_readable_line_per_event_at_info(operator_process: Operator) -> None:
    records = operator_process.records()  # every line is one JSON object
    assert records
    assert not [r for r in records if "settings" in r], "kopf's settings dumped into a log record"
    # Normal operation logs at INFO: the replica's leadership, one "reconciled" line per
    # create or spec change (the controller's; kopf runs no per-object handler), and
    # kopf's note that it runs off the main thread (kubecoord handles the signals).
    by_message = {r["message"]: r["level"] for r in records}
    assert by_message.get("leading: starting reconciliation") == "INFO"
    assert by_message.get("writes fenced at the API server") == "INFO"  # the chart's term policy refuses stale ones
    assert by_message.get("OS signals are ignored: running not in the main thread.") in (None, "INFO")
    reconciled = [r for r in records if r.get("message") == "reconciled"]
    assert reconciled and all(r["level"] == "INFO" for r in reconciled)
    assert all(str(r.get("object", "")).split(" ")[0] in KINDS for r in reconciled)  # "Kind namespace/name"
    # kopf's loop ticks: the active replica's /healthz is 200 (it turns 503 when the loop stalls),
    # and with the chart's RBAC /readyz is 200 too: the API server lets it read what it watches.
    for path in ("/healthz", "/readyz"):
        with urllib.request.urlopen(f"http://127.0.0.1:{operator_process.health_port}{path}", timeout=5) as answer:
            assert answer.status == 200 and json.load(answer) == {"role": "leader", "ok": True, "live": True}


APP = pathlib.Path(__file__).resolve().parents[2] / "examples" / "leader-app"


class App:
    """examples/leader-app/app.py as one pod would run it (its ServiceAccount's token, POD_NAME)."""

    def __init__(self, pod: str, kubeconfig: pathlib.Path, namespace: str, election: str) -> None:
        env = {**os.environ, "POD_NAME": pod, "APP_ELECTION": election, "KUBECONFIG": str(kubeconfig),
               "KUBECOORD_URL": f"kubernetes://{namespace}"}
        self.process = subprocess.Popen([sys.executable, str(APP / "app.py")], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.append(json.loads(raw))

    def saw(self, event: str) -> dict[str, Any] | None:
        return next((line for line in list(self.lines) if line["event"] == event), None)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._reader.join(5)


def _app_pods(real_api: RealApiServer, admin: k8s.ApiClient, namespace: str, name: str, account: str, *,
              replicas: int) -> list[str]:
    """The app's Deployment scaled to ``replicas`` (created on first use) and its Running pods'
    names; on an API server alone (no scheduler, no kubelet) made-up pod names."""
    if not real_api.cluster:
        return [f"{name}-pod-{chr(ord('a') + i)}" for i in range(replicas)]
    core, apps = k8s.CoreV1Api(admin), k8s.AppsV1Api(admin)
    labels = {"app": name}
    try:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    except ApiException as error:
        if error.status != 409:
            raise
    try:
        apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": replicas}})
    except ApiException as error:
        if error.status != 404:
            raise
        apps.create_namespaced_deployment(namespace, {"metadata": {"name": name}, "spec": {
            "replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": account,
                "containers": [{"name": "app", "image": "kubecoord/leader-app:dev"}]}}}})
    return running_pods(admin, namespace, f"app={name}", replicas)


def _bound(real_api: RealApiServer, pod: str) -> str | None:
    return pod if real_api.cluster else None


def test_the_app_waits_for_its_rolebinding_then_leads_fences_and_hands_over_on_sigterm(
    operator_process: Operator, real_api: RealApiServer, real_admin_api: k8s.ApiClient, real_namespace: str,
    mint_kubeconfig: MintKubeconfig,
) -> None:
    name = f"billing-{uuid.uuid4().hex[:6]}"
    account = f"{name}-app"
    pods = _app_pods(real_api, real_admin_api, real_namespace, name, account, replicas=1)
    apps = [App(pods[0], mint_kubeconfig(real_namespace, account, pod=_bound(real_api, pods[0])), real_namespace, name)]
    try:
        # Started before its resources and their RoleBindings exist: it waits, it does not crash.
        eventually(lambda: apps[0].saw("waiting_for_permission") is not None, timeout=60, interval=0.2)
        assert apps[0].process.poll() is None
        custom = k8s.CustomObjectsApi(real_admin_api)
        for kind, spec in (("LeaderElection", {"leaseDurationSeconds": 4, "renewDeadlineSeconds": 3,
                                               "retryPeriodSeconds": 1}), ("KVStore", {"sizeLimit": "64Ki"})):
            custom.create_namespaced_custom_object(GROUP, VERSION, real_namespace, KINDS[kind],
                                                   _resource(kind, name, {**spec, "clients": [account]}))
        eventually(lambda: apps[0].saw("wrote") is not None, timeout=90, interval=0.2)
        first = apps[0].saw("leading")
        assert first is not None
        second_pod = next(p for p in _app_pods(real_api, real_admin_api, real_namespace, name, account, replicas=2)
                          if p != pods[0])
        apps.append(App(second_pod, mint_kubeconfig(real_namespace, account, pod=_bound(real_api, second_pod)),
                        real_namespace, name))
        eventually(lambda: apps[1].saw("candidate") is not None, timeout=60, interval=0.2)
        assert apps[1].saw("leading") is None  # a standby while pod-a leads

        apps[0].process.send_signal(signal.SIGTERM)  # a rollout
        assert apps[0].process.wait(30) == 0
        apps[0].stop()
        assert apps[0].saw("released") is not None
        eventually(lambda: apps[1].saw("wrote") is not None, timeout=20, interval=0.1)  # no lease wait
        second = apps[1].saw("leading")
        assert second is not None and second["epoch"] > first["epoch"]
        # The fence: a result of the old epoch cannot replace the new leader's.
        with _connect(mint_kubeconfig(real_namespace, account), real_namespace) as coordinator:
            store = coordinator.storage(name)
            stored = json.loads(store.fetch("output").result(10))
            assert stored["epoch"] == second["epoch"]
            sys.path.insert(0, str(APP))
            try:
                from app import Fenced, write_fenced  # type: ignore[import-not-found]
            finally:
                sys.path.remove(str(APP))
            with pytest.raises(Fenced):
                write_fenced(store, first["epoch"], "late write of the old leader")
    finally:
        for app in apps:
            app.stop()


# The example Deployment (examples/leader-app/deployment.yaml) is applied on a whole cluster,
# and its copy of app.py checked, by tests/real/test_examples.py.


def test_deleting_the_resources_and_uninstalling_leave_nothing_behind(
    operator_process: Operator, resources: dict[str, str], helm: pathlib.Path, real_api: RealApiServer,
    real_admin_api: k8s.ApiClient, real_namespace: str, release_namespace: str,
) -> None:
    custom = k8s.CustomObjectsApi(real_admin_api)
    uids = {}
    for kind, name in resources.items():
        uids[kind] = custom.get_namespaced_custom_object(GROUP, VERSION, real_namespace, KINDS[kind], name)[
            "metadata"]["uid"]
        custom.delete_namespaced_custom_object(GROUP, VERSION, real_namespace, KINDS[kind], name)

    def gone() -> bool:
        return not any(_exists(real_admin_api, real_namespace, kind, name) for kind, name in resources.items())

    eventually(gone, timeout=60, interval=0.2)  # finalizers finished: deletion never hangs
    # The status daemons exit when kopf asks (no "cancelled. Will escalate." warnings).
    cancelled = [r for r in operator_process.records() if "Will escalate" in str(r.get("message"))]
    assert cancelled == [], json.dumps(cancelled[:3])
    dead = set(uids.values())
    core, leases, rbac = (k8s.CoreV1Api(real_admin_api), k8s.CoordinationV1Api(real_admin_api),
                          k8s.RbacAuthorizationV1Api(real_admin_api))
    left = [*leases.list_namespaced_lease(real_namespace).items, *core.list_namespaced_config_map(real_namespace).items,
            *rbac.list_namespaced_role(real_namespace).items, *rbac.list_namespaced_role_binding(real_namespace).items]
    # Whatever kubecoord made carries an ownerReference (GC removes it with its owner); the
    # deleted resources' objects are all of that kind.
    orphans = [f"{type(obj).__name__} {obj.metadata.name}" for obj in left
               if (obj.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "kubecoord"
               and not obj.metadata.owner_references]
    assert orphans == []
    owned_by_deleted = [obj for obj in left if {ref.uid for ref in obj.metadata.owner_references or []} & dead]
    assert all((obj.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "kubecoord"
               for obj in owned_by_deleted)
    if real_api.cluster:  # and the garbage collector takes them away with their owners

        def collected() -> bool:
            left = [*leases.list_namespaced_lease(real_namespace).items,
                    *core.list_namespaced_config_map(real_namespace).items,
                    *rbac.list_namespaced_role(real_namespace).items,
                    *rbac.list_namespaced_role_binding(real_namespace).items]
            return not any({ref.uid for ref in obj.metadata.owner_references or []} & dead for obj in left)

        eventually(collected, timeout=60, interval=0.5)

    result = run_helm(helm, "uninstall", RELEASE, "--namespace", release_namespace,
                      "--kubeconfig", str(real_api.admin_kubeconfig), "--wait", "--timeout", "60s")
    assert result.returncode == 0, result.stderr
    selector = f"app.kubernetes.io/instance={RELEASE}"
    apps = k8s.AppsV1Api(real_admin_api)
    remaining = [
        *core.list_namespaced_service_account(release_namespace, label_selector=selector).items,
        *apps.list_namespaced_deployment(release_namespace, label_selector=selector).items,
        *rbac.list_cluster_role(label_selector=selector).items,
        *rbac.list_cluster_role_binding(label_selector=selector).items,
        *rbac.list_namespaced_role(release_namespace, label_selector=selector).items,
    ]
    assert [obj.metadata.name for obj in remaining] == []
    # crds.keep (the default) leaves the CRDs, and with them users' resources, on purpose.
    crds = k8s.ApiextensionsV1Api(real_admin_api).list_custom_resource_definition().items
    assert {crd.metadata.name for crd in crds} >= {f"{plural}.{GROUP}" for plural in KINDS.values()}
