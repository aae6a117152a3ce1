"""The operator's defects a review reproduced, on the whole cluster: the real kube-apiserver
with kube-controller-manager's garbage collector, ``kubecoord operator`` as a process.

Each test failed before the status side became a controller (kubecoord.operator.controller):
- deleted resources' daemons lived on and re-created their Leases and ConfigMaps, owned by
  a uid that no longer exists, fighting the garbage collector;
- a backing Lease deleted while the operator was down came back holderless, so a follower
  took it while the holder was still inside its renew deadline (two leaders);
- a LeaderElection named after a Lease the operator does not own granted its clients
  update on that Lease;
- Group ``jobs`` and KVStore / LeaderElection ``jobs-gc`` shared objects (derived names);
- removing a Group client lifted its admission confinement before its RBAC grant went;
- one member's unreadable metadata kept an operator-assigned Group from being assigned;
- a group record left ``assigned_by: operator`` with no spec.assignment was never assigned;
- a replica that lost the operator Lease went on writing.
"""

from __future__ import annotations

import calendar
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import kubecoord
from kubecoord.group_coordinator import GroupMember, UnitsProtocol
from kubecoord.operator.controller.reconciler import WORKERS
from kubecoord.wire.group_record import STABLE, STATE_KEY, GroupState, derived_name, encode_state
from kubecoord_testkit import processes
from kubecoord_testkit.servers.kubernetes import RealApiServer
from kubecoord_testkit.servers.managed import free_port
from tests.fixtures.real_kubernetes import MintKubeconfig, create_namespace, install_crds
from tests.helpers import eventually

pytestmark = [pytest.mark.slow, pytest.mark.long]

GROUP, VERSION = "kubecoord.dev", "v1alpha1"
PLURALS = {"LeaderElection": "leaderelections", "Group": "groups", "KVStore": "kvstores"}
FAST = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}


# -- the cluster: the session server is a whole cluster (its controller manager collects garbage)
@pytest.fixture(scope="module")
def garbage_collector(real_cluster: RealApiServer) -> RealApiServer:
    """kube-controller-manager's garbage collector runs beside the session's API server."""
    return real_cluster


class Operator:
    """``kubecoord operator`` for one namespace, as a process (admin rights unless
    ``kubeconfig`` says otherwise, its own identity; its Lease in ``lease_namespace``,
    default the watched one; ``program``: the module run instead of kubecoord.cli, with
    ``env`` added, e.g. kubecoord_testkit.operator_freeze; ``timings``: its Lease's duration,
    renew deadline and retry period)."""

    def __init__(self, kubeconfig: pathlib.Path, namespace: str, folder: pathlib.Path, identity: str,
                 extra: tuple[str, ...] = (), *, lease_namespace: str | None = None,
                 program: str = "kubecoord.cli", env: dict[str, str] | None = None,
                 timings: tuple[float, float, float] = (3, 2, 0.5)) -> None:
        self.kubeconfig, self.namespace, self.identity, self.extra = kubeconfig, namespace, identity, extra
        self.timings = timings
        self.lease_namespace = lease_namespace or namespace
        self.program, self.env = program, dict(env or {})
        self.log = folder / f"{identity}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Operator:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.program, "--log-level", "INFO", "operator",
                 "--namespace", self.namespace, "--kubeconfig", str(self.kubeconfig),
                 "--lease-namespace", self.lease_namespace, "--identity", self.identity,
                 "--lease-duration", str(self.timings[0]), "--renew-deadline", str(self.timings[1]),
                 "--retry-period", str(self.timings[2]),
                 "--health-port", str(free_port()), "--metrics-port", "0", "--bind", "127.0.0.1", *self.extra],
                stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "KUBECONFIG": str(self.kubeconfig), **self.env},
            )  # fmt: skip
        return self

    def stop(self) -> None:
        if self.process is not None:
            processes.stop(self.process, 30)
            self.process = None

    def serving(self) -> Iterator[Operator]:
        """For a module fixture (``yield from Operator(...).serving()``): started, then
        stopped, its log's tail printed (pytest shows it when a test of the module failed)."""
        self.start()
        try:
            yield self
        finally:
            self.stop()
            print(self.text()[-4000:])

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture(scope="module")
def namespace(real_admin_api: k8s.ApiClient, garbage_collector: RealApiServer) -> str:
    install_crds(real_admin_api)
    return create_namespace(real_admin_api, "controller")


@pytest.fixture(scope="module")
def operator(real_kubeconfig: pathlib.Path, namespace: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    # No admission policy on this server: Group clients are accepted unconfined (the
    # confinement itself: test_grants_real.py).
    yield from Operator(real_kubeconfig, namespace, tmp_path_factory.mktemp("operator"), "operator-a",
                        ("--allow-unconfined-group-clients",)).serving()


class Api:
    def __init__(self, admin: k8s.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self.custom = k8s.CustomObjectsApi(admin)
        self.core = k8s.CoreV1Api(admin)
        self.leases = k8s.CoordinationV1Api(admin)
        self.rbac = k8s.RbacAuthorizationV1Api(admin)

    def create(self, kind: str, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURALS[kind], body)

    def delete(self, kind: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURALS[kind], name)

    def status(self, kind: str, name: str) -> dict[str, Any]:
        try:
            body = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURALS[kind], name)
        except ApiException as error:
            if error.status == 404:
                return {}
            raise
        return dict(body.get("status") or {})

    def condition(self, kind: str, name: str, type_: str) -> dict[str, Any]:
        conditions = self.status(kind, name).get("conditions") or []
        return next((c for c in conditions if c["type"] == type_), {})

    def ready(self, kind: str, name: str) -> bool:
        return self.condition(kind, name, "Ready").get("status") == "True"

    def lease_names(self) -> set[str]:
        return {lease.metadata.name for lease in self.leases.list_namespaced_lease(self.namespace).items}

    def configmap_names(self) -> set[str]:
        return {cm.metadata.name for cm in self.core.list_namespaced_config_map(self.namespace).items}


@pytest.fixture(scope="module")
def api(real_admin_api: k8s.ApiClient, namespace: str) -> Api:
    return Api(real_admin_api, namespace)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _connect(kubeconfig: pathlib.Path, namespace: str, **timings: float) -> kubecoord.Coordinator:
    return kubecoord.connect(f"kubernetes://{namespace}", kubeconfig=str(kubeconfig), **(timings or FAST))


# -- deleted resources ----------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_deleted_resources_stay_deleted_and_their_names_are_free_again(operator: Operator, api: Api) -> None:
    elections = [_unique("gone-le") for _ in range(8)]
    stores = [_unique("gone-kv") for _ in range(4)]
    for name in elections:
        api.create("LeaderElection", name, {})
    for name in stores:
        api.create("KVStore", name, {})
    everything = [("LeaderElection", n) for n in elections] + [("KVStore", n) for n in stores]
    eventually(lambda: all(api.ready(kind, name) for kind, name in everything), timeout=60, interval=0.5)
    backing = set(elections) | {f"kubecoord-kv.{name}" for name in stores}
    assert backing <= api.lease_names() | api.configmap_names()
    for kind, name in everything:
        api.delete(kind, name)
    # The garbage collector removes the backing objects (ownerReferences) ...
    eventually(lambda: not backing & (api.lease_names() | api.configmap_names()), timeout=60, interval=0.5)
    # ... and nothing brings them back (the old daemons re-created them every ~10 s).
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        back = backing & (api.lease_names() | api.configmap_names())
        assert not back, f"re-created after their resources were deleted: {sorted(back)}"
        time.sleep(0.5)
    # A new resource of a deleted one's name owns its objects (no NotOwned leftovers).
    api.create("LeaderElection", elections[0], {})
    eventually(lambda: api.ready("LeaderElection", elections[0]), timeout=30, interval=0.3)
    assert api.condition("LeaderElection", elections[0], "BackingObjects")["reason"] == "Owned"
    assert "re-created deleted backing objects" not in operator.text()


# -- a Lease deleted by hand while its holder renews -----------------------------------------
@pytest.mark.timeout(240)
def test_a_lease_deleted_while_its_holder_renews_stays_owned_and_led(
    operator: Operator, api: Api, real_kubeconfig: pathlib.Path
) -> None:
    """A renewal is a PUT, and a PUT creates a missing Lease: a holder renewing every 0.5 s
    put a deleted Lease back itself, without the ownerReference, before the operator could
    re-create it. The resource then showed NotOwned and its clients lost their grant."""
    name = _unique("deleted")
    api.create("LeaderElection", name, {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2,
                                        "retryPeriodSeconds": 0.5})
    eventually(lambda: api.ready("LeaderElection", name), timeout=60, interval=0.3)
    with _connect(real_kubeconfig, api.namespace) as side:
        holder = side.leader_election(name)
        assert holder.nominate("pod-a")
        eventually(lambda: api.status("LeaderElection", name).get("leader") == "pod-a", timeout=30, interval=0.2)

        def owned_and_led() -> bool:
            try:
                lease = api.leases.read_namespaced_lease(name, api.namespace)
            except ApiException:
                return False
            return bool(lease.metadata.owner_references) and lease.spec.holder_identity == "pod-a"

        for _ in range(3):
            api.leases.delete_namespaced_lease(name, api.namespace)
            time.sleep(0.6)  # past the holder's next renewal (every 0.5 s)
            try:
                eventually(owned_and_led, timeout=60, interval=0.2)
            except AssertionError:
                try:
                    found: object = api.leases.read_namespaced_lease(name, api.namespace)
                except ApiException as error:
                    found = f"no Lease ({error.status})"
                raise AssertionError(f"{found}\n{api.status('LeaderElection', name)}") from None
        eventually(lambda: api.ready("LeaderElection", name), timeout=60, interval=0.3)
        assert api.condition("LeaderElection", name, "BackingObjects")["reason"] == "Owned"
        eventually(lambda: holder.is_leader("pod-a"), timeout=30, interval=0.2)


# -- a Lease deleted while the operator is down ---------------------------------------------
@pytest.mark.timeout(240)
def test_a_lease_deleted_while_the_operator_is_down_comes_back_with_its_holder(
    operator: Operator, api: Api, real_kubeconfig: pathlib.Path
) -> None:
    name = _unique("restart")
    # The holder renews only every 100 s: the operator's re-creation comes before the
    # holder's own next renewal (a renewal is a PUT, which creates a missing Lease). With a
    # renewal every second the holder put its Lease back itself before the restarted
    # operator did, and the test passed on the code that re-created it holderless; with
    # one every 40 s the same happened at load 27, the operator's restart being slower.
    timings = {"lease_duration": 150.0, "renew_deadline": 125.0, "retry_period": 100.0}
    api.create("LeaderElection", name, {"leaseDurationSeconds": 150, "renewDeadlineSeconds": 125,
                                        "retryPeriodSeconds": 100})
    eventually(lambda: api.ready("LeaderElection", name), timeout=60, interval=0.3)
    with _connect(real_kubeconfig, api.namespace, **timings) as a_side, \
            _connect(real_kubeconfig, api.namespace, **timings) as b_side:
        holder, follower = a_side.leader_election(name), b_side.leader_election(name)
        assert holder.nominate("pod-a")
        nominated = time.monotonic()
        follower.nominate("pod-b")
        eventually(lambda: api.status("LeaderElection", name).get("leader") == "pod-a", timeout=30, interval=0.2)
        epoch = api.status("LeaderElection", name)["epoch"]
        operator.stop()
        first_seen: list[dict[str, Any]] = []
        watcher = threading.Thread(target=_first_version, args=(api, name, first_seen), daemon=True)
        try:
            api.leases.delete_namespaced_lease(name, api.namespace)
            watcher.start()
        finally:
            operator.start()
        both: list[float] = []
        # Past the holder's next renewal (100 s after it took the Lease), which a holderless
        # re-creation would have given to the follower meanwhile.
        deadline = max(time.monotonic() + 20, nominated + 105)
        while time.monotonic() < deadline:
            if holder.is_leader("pod-a") and follower.is_leader("pod-b"):
                both.append(time.monotonic())
            time.sleep(0.05)
        assert not both, f"two leaders for {both[-1] - both[0]:.1f} s after the operator restarted"
        watcher.join(5)
        # As the operator re-created it: the last known holder, never holderless (a
        # holderless Lease is anyone's to take while the holder still believes it leads),
        # one epoch above the status's (the status may lag the Lease by one acquisition:
        # kubecoord.operator.backing).
        assert first_seen and first_seen[0]["ownerReferences"], f"not the operator's re-creation: {first_seen}"
        assert first_seen[0]["spec"].get("holderIdentity") == "pod-a", first_seen
        assert first_seen[0]["spec"].get("leaseTransitions") == epoch + 1
        lease = api.leases.read_namespaced_lease(name, api.namespace)
        assert lease.spec.holder_identity == "pod-a"
        assert lease.spec.lease_transitions == epoch + 1  # the same term, its token one up
        assert holder.is_leader("pod-a")


@pytest.mark.timeout(240)
def test_an_epoch_issued_while_the_operator_was_down_is_never_issued_again(
    operator: Operator, api: Api, real_kubeconfig: pathlib.Path
) -> None:
    """The soak's epoch_not_increasing (issue 21): the status says epoch E, a new leader
    took E + 1 while the operator was down, the Lease was deleted; the operator, restarted,
    re-created it at E from the status, and a candidate that never saw E + 1 took E + 1
    a second time."""
    name = _unique("epoch")
    api.create("LeaderElection", name, {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2,
                                        "retryPeriodSeconds": 0.5})
    eventually(lambda: api.ready("LeaderElection", name), timeout=60, interval=0.3)
    issued: list[int] = []
    with _connect(real_kubeconfig, api.namespace) as a_side:
        first = a_side.leader_election(name)
        assert first.nominate("pod-a")
        eventually(lambda: api.status("LeaderElection", name).get("leader") == "pod-a", timeout=30, interval=0.2)
        status_epoch = api.status("LeaderElection", name)["epoch"]
        issued.append(status_epoch)
        operator.stop()
        try:
            with _connect(real_kubeconfig, api.namespace) as b_side:
                second = b_side.leader_election(name)
                second.nominate("pod-b")
                first.resign("pod-a")
                eventually(lambda: second.is_leader("pod-b"), timeout=30, interval=0.1)
                leader = second.get_leader()
                assert leader is not None
                issued.append(leader.epoch)
            # pod-b resigned on close; the status still says pod-a at the first epoch.
            assert api.status("LeaderElection", name)["epoch"] == status_epoch < issued[-1]
            api.leases.delete_namespaced_lease(name, api.namespace)
        finally:
            operator.start()
    # A candidate that never saw the deleted Lease: it waits for the operator's re-creation
    # and takes the election after it (the re-created holder pod-a is gone).
    with _connect(real_kubeconfig, api.namespace) as c_side:
        newcomer = c_side.leader_election(name)
        newcomer.nominate("pod-c")
        eventually(lambda: newcomer.is_leader("pod-c"), timeout=90, interval=0.2)
        leader = newcomer.get_leader()
        assert leader is not None and leader.id == "pod-c"
        assert leader.epoch > max(issued), f"pod-c was handed epoch {leader.epoch}; issued before: {issued}"


def _first_version(api: Api, name: str, seen: list[dict[str, Any]]) -> None:
    """The spec and owner kinds of the first version of Lease ``name`` created from now on (a watch)."""
    from kubernetes import watch

    stream = watch.Watch()
    for event in stream.stream(api.leases.list_namespaced_lease, api.namespace,
                               field_selector=f"metadata.name={name}", timeout_seconds=60):
        if event["type"] == "ADDED":
            lease = event["object"]
            seen.append({"spec": api.leases.api_client.sanitize_for_serialization(lease.spec) or {},
                         "ownerReferences": [ref.kind for ref in lease.metadata.owner_references or []]})
            stream.stop()
            return


# -- a foreign Lease --------------------------------------------------------------------------
@pytest.mark.timeout(180)
def test_a_resource_named_after_a_foreign_lease_grants_nothing_on_it(
    operator: Operator, api: Api, real_kubeconfig: pathlib.Path, mint_kubeconfig: MintKubeconfig
) -> None:
    name = _unique("foreign")
    api.leases.create_namespaced_lease(api.namespace, {"metadata": {"name": name}, "spec": {"holderIdentity": "x"}})
    api.create("LeaderElection", name, {"clients": ["intruder"]})
    eventually(lambda: api.condition("LeaderElection", name, "BackingObjects").get("reason") == "NotOwned",
               timeout=60, interval=0.3)
    assert api.condition("LeaderElection", name, "Ready").get("status") == "False"
    kubeconfig = mint_kubeconfig(api.namespace, "intruder")
    intruder = k8s.CoordinationV1Api(_client(kubeconfig))
    patch = {"spec": {"holderIdentity": "intruder"}}
    for _ in range(10):  # whatever the operator granted meanwhile: never write on that Lease
        with pytest.raises(ApiException) as denied:
            intruder.patch_namespaced_lease(name, api.namespace, patch)
        assert denied.value.status == 403
        time.sleep(0.3)
    assert api.leases.read_namespaced_lease(name, api.namespace).spec.holder_identity == "x"


def _client(kubeconfig: pathlib.Path) -> k8s.ApiClient:
    from kubernetes import config as k8s_config

    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return k8s.ApiClient(configuration)


# -- derived names ------------------------------------------------------------------------------
@pytest.mark.timeout(120)
def test_no_resource_can_take_a_group_coordinators_names(operator: Operator, api: Api) -> None:
    group = _unique("jobs")
    # One direction: the Group exists first; its coordinator's names are not for others.
    api.create("Group", group, {})
    for kind in ("KVStore", "LeaderElection"):
        with pytest.raises(ApiException) as refused:
            api.create(kind, derived_name(group), {})
        assert refused.value.status == 422, refused.value.body
        assert "reserved" in refused.value.body
    # The other: a store or election named like some future Group's coordinator is refused
    # before that Group exists, so the Group is never robbed of them.
    later = _unique("later")
    for kind in ("KVStore", "LeaderElection"):
        with pytest.raises(ApiException) as refused:
            api.create(kind, derived_name(later), {})
        assert refused.value.status == 422
    api.create("Group", later, {})
    eventually(lambda: api.ready("Group", later) and api.ready("Group", group), timeout=60, interval=0.3)


# -- revoke order -------------------------------------------------------------------------------
def _confined(api: Api) -> set[str]:
    """The ServiceAccounts the namespace's Lease grants confine now."""
    try:
        return set(api.core.read_namespaced_config_map("kubecoord-lease-grants", api.namespace).data or {})
    except ApiException:
        return set()


def _group_with_two_confined_clients(api: Api, prefix: str) -> tuple[str, list[str]]:
    """A Ready Group with clients "stays" and "leaves", both confined; its name, and its
    neighbours' names.

    Beside it, Groups and a LeaderElection with client "stays" only: every spec write or
    resume of theirs recomputes the namespace's Lease grants from the current specs, the
    race that lifted "leaves" before its RoleBinding changed (issue 21)."""
    name = _unique(prefix)
    others = [_unique(f"{prefix}-o") for _ in range(3)]
    api.create("Group", name, {"clients": ["stays", "leaves"]})
    for other in others:
        api.create("Group", other, {"clients": ["stays"]})
    api.create("LeaderElection", others[0] + "-le", {"clients": ["stays", "leaves"]})
    eventually(lambda: all(api.ready("Group", n) for n in [name, *others]), timeout=60, interval=0.3)
    eventually(lambda: {"stays", "leaves"} <= _confined(api), timeout=30, interval=0.2)
    return name, others


class _GrantHistory:
    """Every version of the namespace's Lease grants ConfigMap and of one Group's
    RoleBinding from a resourceVersion on, recorded by two watches started before the
    change. Both kinds live in the same etcd, whose revision is their resourceVersion: the
    merged, sorted versions are the order in which the server applied the writes (no audit
    log read, no timing)."""

    def __init__(self, api: Api, group: str, since: str) -> None:
        self.api, self.binding, self.since = api, f"kubecoord-group-{group}", since
        self.versions: list[tuple[int, str, set[str] | None]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch, args=(api.core.list_namespaced_config_map,
                                                      "kubecoord-lease-grants", "grants"), daemon=True),
            threading.Thread(target=self._watch, args=(api.rbac.list_namespaced_role_binding,
                                                      self.binding, "binding"), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _watch(self, lister: Any, name: str, what: str) -> None:
        from kubernetes import watch

        version = self.since
        while not self._stop.is_set():
            stream = watch.Watch()
            for event in stream.stream(lister, self.api.namespace, field_selector=f"metadata.name={name}",
                                       resource_version=version, timeout_seconds=2):
                obj = event["object"]
                version = obj.metadata.resource_version
                if event["type"] == "DELETED":
                    accounts = None
                elif what == "grants":
                    accounts = set(obj.data or {})
                else:
                    accounts = {s.name for s in obj.subjects or []}
                with self._lock:
                    self.versions.append((int(version), what, accounts))

    def stop(self) -> list[tuple[int, str, set[str] | None]]:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        with self._lock:
            return sorted(self.versions)

    def assert_never_bound_unconfined(self, account: str) -> None:
        """At no version was ``account`` bound by the RoleBinding and absent from the grants;
        and both changes happened (it was unbound, then unconfined)."""
        versions = self.stop()
        bound, confined = True, True  # both, when the change was made (the test checked)
        unbound = unconfined = False
        for version, what, accounts in versions:
            if what == "binding":
                bound = accounts is not None and account in accounts
                unbound = unbound or not bound
            else:
                confined = accounts is not None and account in accounts
                unconfined = unconfined or not confined
            assert not (bound and not confined), (
                f"{account} bound by its RoleBinding but not confined at resourceVersion {version}: {versions}")
        assert unbound and unconfined, versions


def _spec_patched(api: Api, name: str, clients: list[str]) -> None:
    api.custom.patch_namespaced_custom_object(GROUP, VERSION, api.namespace, "groups", name,
                                              {"spec": {"clients": clients}})


@pytest.mark.timeout(180)
def test_removing_a_group_client_revokes_its_rbac_before_its_confinement(operator: Operator, api: Api) -> None:
    name, others = _group_with_two_confined_clients(api, "revoke")
    history = _GrantHistory(api, name, _list_version(api))
    _spec_patched(api, name, ["stays"])
    for other in others:  # their spec writes recompute the grants while the revoke runs
        _spec_patched(api, other, ["stays", f"{other}-sa"])
    eventually(lambda: "leaves" not in _confined(api), timeout=30, interval=0.2)
    history.assert_never_bound_unconfined("leaves")
    subjects = api.rbac.read_namespaced_role_binding(f"kubecoord-group-{name}", api.namespace).subjects
    assert [s.name for s in subjects] == ["stays"]


def _list_version(api: Api) -> str:
    """The namespace's current resourceVersion (a list's), to watch from."""
    return str(api.core.list_namespaced_config_map(api.namespace, limit=1).metadata.resource_version)


@pytest.mark.timeout(240)
def test_a_client_removed_while_the_operator_is_down_loses_its_rbac_before_its_confinement(
    operator: Operator, api: Api
) -> None:
    # The operator keeps no copy of the old spec on the object (no kopf last-handled
    # annotation): after a restart the old clients are the RoleBinding's subjects. Every
    # other Group's resume recomputes the namespace's grants too (the race issue 21 found).
    name, _ = _group_with_two_confined_clients(api, "revoke-down")
    operator.stop()
    try:
        history = _GrantHistory(api, name, _list_version(api))
        _spec_patched(api, name, ["stays"])
    finally:
        operator.start()
    eventually(lambda: "leaves" not in _confined(api), timeout=90, interval=0.2)
    history.assert_never_bound_unconfined("leaves")
    subjects = api.rbac.read_namespaced_role_binding(f"kubecoord-group-{name}", api.namespace).subjects
    assert [s.name for s in subjects] == ["stays"]


# -- group assignment ----------------------------------------------------------------------------
def _member(coordinator: kubecoord.Coordinator, group: str, member_id: str) -> GroupMember:
    member = coordinator.group_coordinator(group, UnitsProtocol([], assignors=["sticky"]), member_id=member_id,
                                           session_timeout=1.0, rebalance_timeout=10.0)
    assert isinstance(member, GroupMember)
    member.join()
    return member


class _Unreadable(UnitsProtocol):
    def metadata(self) -> list[tuple[str, bytes]]:
        return [("sticky", b"{not json")]


@pytest.mark.timeout(180)
def test_one_member_with_unreadable_metadata_does_not_keep_the_group_unassigned(
    operator: Operator, api: Api, real_kubeconfig: pathlib.Path
) -> None:
    name = _unique("poison")
    api.create("Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5, "assignment": {
        "units": 6, "assignor": "sticky", "sessionTimeoutSeconds": 1, "rebalanceTimeoutSeconds": 10}})
    eventually(lambda: api.ready("Group", name), timeout=60, interval=0.3)
    with _connect(real_kubeconfig, api.namespace) as first, _connect(real_kubeconfig, api.namespace) as second, \
            _connect(real_kubeconfig, api.namespace) as third:
        # A member that takes part in every generation but whose metadata nobody can read.
        bad = third.group_coordinator(name, _Unreadable([], assignors=["sticky"]), member_id="bad",
                                      session_timeout=1.0, rebalance_timeout=10.0)
        bad.join()
        a, b = _member(first, name, "a"), _member(second, name, "b")
        try:
            def assigned() -> bool:
                status = api.status("Group", name)
                units = {m["id"]: m.get("units") for m in status.get("members") or []}
                return status.get("phase") == "Stable" and bool(units.get("a")) and bool(units.get("b"))

            eventually(assigned, timeout=60, interval=0.3)
            units = {m["id"]: m.get("units") or [] for m in api.status("Group", name)["members"]}
            assert sorted(units["a"] + units["b"]) == [str(i) for i in range(6)]
            assert not units.get("bad")
        finally:
            a.close()
            b.close()
            bad.close()
    assert operator.text().count("Traceback") == 0


@pytest.mark.timeout(180)
def test_a_group_without_spec_assignment_is_handed_back_to_its_members(
    operator: Operator, api: Api, real_kubeconfig: pathlib.Path
) -> None:
    name = _unique("handback")
    api.create("Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5})
    eventually(lambda: api.ready("Group", name), timeout=60, interval=0.3)
    with _connect(real_kubeconfig, api.namespace) as first, _connect(real_kubeconfig, api.namespace) as writer:
        # What a Group re-created without spec.assignment finds: the record of its
        # operator-assigned predecessor, still marked assigned_by operator.
        store = writer.storage(derived_name(name))
        store.put(STATE_KEY, encode_state(GroupState(generation=3, phase=STABLE, protocol_type="units",
                                                     assigned_by="operator")))
        member = _member(first, name, "a")
        try:
            def member_led() -> bool:
                status = api.status("Group", name)
                return status.get("assignedBy") == "members" and status.get("phase") == "Stable"

            eventually(member_led, timeout=60, interval=0.3)
            eventually(lambda: member.assignment is not None, timeout=30, interval=0.2)
        finally:
            member.close()


# -- HA ---------------------------------------------------------------------------------------------
def _operator_writes(real_api: RealApiServer, namespace: str) -> list[tuple[float, str]]:
    """(request received, user agent) of every write in ``namespace`` the operators made."""
    result = []
    for line in real_api.audit_log.read_text().splitlines():
        event = json.loads(line)
        agent = str(event.get("userAgent") or "")
        ref = event.get("objectRef") or {}
        if not agent.startswith("kubecoord-operator/") or ref.get("namespace") != namespace:
            continue
        if event.get("verb") not in ("create", "update", "patch", "delete") or ref.get("resource") == "leases":
            continue  # the operator Lease itself is the election, not reconciliation
        stamp = event["requestReceivedTimestamp"]  # UTC
        moment = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float("0." + stamp[20:26] or "0")
        result.append((moment, agent))
    return result


@pytest.mark.timeout(240)
def test_a_replica_that_lost_the_operator_lease_stops_writing_before_the_next_one_starts(
    real_admin_api: k8s.ApiClient, real_api: RealApiServer, real_kubeconfig: pathlib.Path,
    garbage_collector: RealApiServer, tmp_path: pathlib.Path,
) -> None:
    install_crds(real_admin_api)
    namespace = create_namespace(real_admin_api, "ha")
    api = Api(real_admin_api, namespace)
    first = Operator(real_kubeconfig, namespace, tmp_path, "replica-1").start()
    eventually(lambda: "leading: starting reconciliation" in first.text(), timeout=60, interval=0.2)
    second = Operator(real_kubeconfig, namespace, tmp_path, "replica-2").start()
    names = [_unique("ha") for _ in range(3)]
    stop = threading.Event()
    try:
        for name in names:
            api.create("LeaderElection", name, {"leaseDurationSeconds": 2, "renewDeadlineSeconds": 1.5,
                                                "retryPeriodSeconds": 0.4})
        eventually(lambda: all(api.ready("LeaderElection", n) for n in names), timeout=60, interval=0.3)

        def churn() -> None:  # leader changes: status writes all the time
            with _connect(real_kubeconfig, namespace, lease_duration=2.0, renew_deadline=1.5,
                          retry_period=0.4) as coordinator:
                handles = [coordinator.leader_election(n) for n in names]
                turn = 0
                while not stop.is_set():
                    for handle in handles:
                        handle.nominate(f"c{turn}")
                        stop.wait(0.2)
                        handle.resign(f"c{turn}")
                    turn += 1

        threading.Thread(target=churn, daemon=True).start()
        time.sleep(3)
        assert first.process is not None
        first.process.send_signal(signal.SIGSTOP)  # a replica frozen past its lease (GC pause, a stalled node)
        time.sleep(0.5)  # a renewal already on the wire lands
        # The frozen replica's last renewal: by its own clock it may act until that plus its
        # renew deadline (2 s), and not a moment later (kubecoord.operator.fencing).
        renewed = api.leases.read_namespaced_lease("kubecoord-operator", namespace).spec.renew_time.timestamp()
        eventually(lambda: "leading: starting reconciliation" in second.text(), timeout=30, interval=0.2)
        time.sleep(3)
        resumed_wall = time.time()  # the audit log's clock (the same machine's)
        first.process.send_signal(signal.SIGCONT)
        resumed = time.monotonic()
        eventually(lambda: first.process is not None and first.process.poll() is not None, timeout=30, interval=0.2)
        stopped_after = time.monotonic() - resumed
        time.sleep(3)
    finally:
        stop.set()
        if first.process is not None and first.process.poll() is None:
            first.process.send_signal(signal.SIGCONT)
        first.stop()
        second.stop()
    writes = _operator_writes(real_api, namespace)
    by_second = [moment for moment, agent in writes if agent.endswith("/replica-2")]
    assert by_second, "the standby never took over"
    # Without --fence-writes (this test's mode) the in-process check cannot stop a request
    # that passed it before the freeze: it leaves on SIGCONT (docs/operator.md states it;
    # tests/operator/test_fenced_writes_real.py shows the API server refusing it with
    # --fence-writes). So the deposed replica's writes received after its renew deadline
    # (0.5 s for a request to reach the server) are exactly those: at most one per worker,
    # received within 1 s of SIGCONT; none checked after it resumed.
    deadline = renewed + 2.0 + 0.5
    late = [(moment, moment - by_second[0]) for moment, agent in writes
            if agent.endswith("/replica-1") and moment > min(deadline, by_second[0])]
    frozen_in_flight = [m for m, _ in late if resumed_wall - 0.05 <= m <= resumed_wall + 1.0]
    checked_late = [(round(m - resumed_wall, 3), round(after, 3)) for m, after in late
                    if not resumed_wall - 0.05 <= m <= resumed_wall + 1.0]
    assert not checked_late, f"the deposed replica wrote after its term, not in flight at the freeze: {checked_late}"
    assert len(frozen_in_flight) <= WORKERS
    assert "lost the operator lease" in first.text()
    assert stopped_after < 15, f"the deposed replica took {stopped_after:.1f} s to stop"


# -- epochs across hand edits, deletions and re-creations -----------------------------------
def _tamper_lease(api: Api, name: str, how: str) -> None:
    if how == "edit":
        api.leases.patch_namespaced_lease(name, api.namespace, {"spec": {"leaseTransitions": 0}})
        return
    # Deleted, and created again by someone else before the operator could (kubectl apply
    # of a manifest): a foreign Lease at epoch 0, which the operator never adopts.
    api.leases.delete_namespaced_lease(name, api.namespace)
    try:
        api.leases.create_namespaced_lease(api.namespace, {"metadata": {"name": name},
                                                           "spec": {"leaseTransitions": 0}})
    except ApiException as error:
        if error.status != 409:  # the operator's re-creation came first: edit that one down
            raise
        api.leases.patch_namespaced_lease(name, api.namespace, {"spec": {"leaseTransitions": 0}})


@pytest.mark.timeout(240)
@pytest.mark.parametrize("operator_up", [True, False], ids=["operator-up", "operator-down"])
@pytest.mark.parametrize("how", ["edit", "recreate"])
def test_an_elections_epoch_continues_above_after_its_free_lease_is_edited_or_recreated(
    operator: Operator, api: Api, real_kubeconfig: pathlib.Path, how: str, operator_up: bool
) -> None:
    """An operator-managed election: its epochs restarted at 1 after its Lease was deleted
    and re-created by someone else (or its leaseTransitions edited down), the operator
    running or not. The Lease NAME.epoch, made by the operator, keeps them going up."""
    name = _unique("mark")
    api.create("LeaderElection", name, {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2,
                                        "retryPeriodSeconds": 0.5})
    eventually(lambda: api.ready("LeaderElection", name), timeout=60, interval=0.3)
    assert f"{name}.epoch" in api.lease_names()
    issued: list[int] = []
    for holder in ("pod-a", "pod-b"):
        with _connect(real_kubeconfig, api.namespace) as side:
            election = side.leader_election(name)
            election.nominate(holder)
            eventually(lambda: election.is_leader(holder), timeout=30, interval=0.1)  # noqa: B023
            leader = election.get_leader()
            assert leader is not None
            issued.append(leader.epoch)
    if not operator_up:
        operator.stop()
    try:
        _tamper_lease(api, name, how)
        # A candidate that never saw the Lease before.
        with _connect(real_kubeconfig, api.namespace) as c_side:
            newcomer = c_side.leader_election(name)
            newcomer.nominate("pod-c")
            eventually(lambda: newcomer.is_leader("pod-c"), timeout=90, interval=0.2)
            leader = newcomer.get_leader()
            assert leader is not None and leader.id == "pod-c"
            assert leader.epoch > max(issued), f"pod-c was handed epoch {leader.epoch}; issued before: {issued}"
    finally:
        if not operator_up:
            operator.start()
