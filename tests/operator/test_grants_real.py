"""The operator's grants and backing objects follow the specs, on the whole cluster (the
real kube-apiserver with kube-controller-manager's garbage collector, ``kubecoord
operator`` as a process, acting ServiceAccounts with tokens of their own):

- a subject added to a resource's RoleBinding behind the operator's back (what a deposed
  replica's late write does) is removed within one resync period, and that ServiceAccount's
  Lease patch is refused afterwards;
- a Group deleted and re-created at once under its name (the old one's objects not yet
  collected: the create meets them, 409) ends with its coordinator's Lease and ConfigMap
  present and owned by the new Group's uid; a same-named object nobody's kubecoord made is
  reported (NotOwned) and granted to nobody;
- Group clients fail closed: without the chart's admission policy they get no Lease
  writes (the Group is Ready=False, reason Unconfined), with it they may write their own
  member Leases and no other, and once it is removed the writes go again.
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.chart import conftest as chart_fixtures
from tests.chart.conftest import CHART, run_helm
from tests.fixtures.real_kubernetes import MintKubeconfig, create_namespace, install_crds
from tests.helpers import eventually
from tests.operator.test_controller_real import Api, Operator

pytestmark = pytest.mark.slow

helm = chart_fixtures.helm

RELEASE = f"g{uuid.uuid4().hex[:6]}"
POLICY = "kubecoord-lease-grants"
"""The chart's policy (one per cluster, whatever the release)."""
BINDING = f"{RELEASE}-kubecoord-lease-grants"
"""Its binding under this module's release name (the operator is told to look for both)."""
RESYNC_SECONDS = 5
"""The operator's --resync-seconds here: a stale grant must go within this (plus a reconcile)."""


@pytest.fixture(scope="module")
def namespace(real_admin_api: k8s.ApiClient, real_cluster: RealApiServer) -> str:
    install_crds(real_admin_api)
    return create_namespace(real_admin_api, "grants")


@pytest.fixture(scope="module")
def operator(real_kubeconfig: pathlib.Path, namespace: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    yield from Operator(real_kubeconfig, namespace, tmp_path_factory.mktemp("operator"), "grants-a",
                        ("--resync-seconds", str(RESYNC_SECONDS), "--confinement-policy", POLICY,
                         "--confinement-binding", BINDING)).serving()


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


def _owner_uids(api: Api, name: str) -> tuple[set[str] | None, set[str] | None]:
    """The ownerReference uids of the Group coordinator's Lease and ConfigMap (None: absent)."""
    found: list[set[str] | None] = []
    for read in (lambda: api.leases.read_namespaced_lease(f"{name}-gc", api.namespace),
                 lambda: api.core.read_namespaced_config_map(f"kubecoord-kv.{name}-gc", api.namespace)):
        try:
            obj = read()
        except ApiException as error:
            if error.status != 404:
                raise
            found.append(None)
            continue
        found.append({ref.uid for ref in obj.metadata.owner_references or []})
    return found[0], found[1]


def _uid(api: Api, name: str) -> str:
    body = api.custom.get_namespaced_custom_object("kubecoord.dev", "v1alpha1", api.namespace, "groups", name)
    return str(body["metadata"]["uid"])


@pytest.mark.timeout(300)
def test_a_group_recreated_at_once_gets_its_own_backing_objects(operator: Operator, api: Api) -> None:
    names = [_unique("again") for _ in range(4)]
    for name in names:
        api.create("Group", name, {})
    eventually(lambda: all(api.ready("Group", name) for name in names), timeout=60, interval=0.3)
    old = {name: _uid(api, name) for name in names}
    for name in names:
        assert _owner_uids(api, name) == ({old[name]}, {old[name]})
    for name in names:  # deleted and created again before the garbage collector runs
        api.delete("Group", name)
        eventually(lambda name=name: api.status("Group", name) == {} and _absent(api, name), timeout=30, interval=0.05)
        api.create("Group", name, {})
    new = {name: _uid(api, name) for name in names}
    assert all(new[name] != old[name] for name in names)
    # The old objects go with the old Group; the new Group's own take their place.
    eventually(lambda: all(_owner_uids(api, name) == ({new[name]}, {new[name]}) for name in names),
               timeout=90, interval=0.3)
    try:
        eventually(lambda: all(api.ready("Group", name) for name in names), timeout=60, interval=0.3)
    except AssertionError as error:
        unready = {name: api.condition("Group", name, "Ready") for name in names if not api.ready("Group", name)}
        raise AssertionError(f"{error}; not Ready: {unready}") from None


def _absent(api: Api, name: str) -> bool:
    try:
        api.custom.get_namespaced_custom_object("kubecoord.dev", "v1alpha1", api.namespace, "groups", name)
    except ApiException as error:
        return error.status == 404
    return False


class Policy:
    """The chart's admission policy and binding, rendered for RELEASE, created and deleted."""

    def __init__(self, admin: k8s.ApiClient, helm: pathlib.Path) -> None:
        from kubernetes.dynamic import DynamicClient

        rendered = run_helm(helm, "template", RELEASE, str(CHART), "--show-only", "templates/admissionpolicy.yaml")
        assert rendered.returncode == 0, rendered.stderr
        self.documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
        assert [d["metadata"]["name"] for d in self.documents] == [POLICY, BINDING]
        dynamic = DynamicClient(admin)
        self.resources = [dynamic.resources.get(api_version=d["apiVersion"], kind=d["kind"]) for d in self.documents]
        self.installed = False

    def install(self) -> None:
        for resource, document in zip(self.resources, self.documents, strict=True):
            resource.create(body=document)
        self.installed = True

    def remove(self) -> None:
        for resource, document in reversed(list(zip(self.resources, self.documents, strict=True))):
            try:
                resource.delete(name=document["metadata"]["name"])
            except ApiException as error:
                if error.status != 404:
                    raise
        self.installed = False


def _create_status(leases: k8s.CoordinationV1Api, namespace: str, name: str) -> int:
    try:
        leases.create_namespaced_lease(namespace, {"metadata": {"name": name}, "spec": {}})
    except ApiException as error:
        return int(error.status)
    return 201


def _lease_verbs(api: Api, group: str) -> set[str]:
    role = api.rbac.read_namespaced_role(f"kubecoord-group-{group}", api.namespace)
    return {verb for rule in role.rules if "leases" in rule.resources and not rule.resource_names
            for verb in rule.verbs}


@pytest.mark.timeout(300)
def test_group_clients_get_lease_writes_only_while_the_policy_confines_them(
    operator: Operator, api: Api, namespace: str, mint_kubeconfig: MintKubeconfig,
    real_admin_api: k8s.ApiClient, helm: pathlib.Path
) -> None:
    group = _unique("fenced")
    account = f"{group}-member"
    as_member = _as(mint_kubeconfig(namespace, account))
    policy = Policy(real_admin_api, helm)
    api.create("Group", group, {"clients": [account]})
    try:
        # 1. No policy: fail closed — reads only, Ready=False saying what to install.
        eventually(lambda: api.condition("Group", group, "Ready").get("reason") == "Unconfined",
                   timeout=60, interval=0.3)
        message = api.condition("Group", group, "Ready")["message"]
        assert POLICY in message and BINDING in message and "rbac.confineGroupClients=true" in message, message
        assert "rbac.allowUnconfinedGroupClients=true" in message, message
        assert _lease_verbs(api, group) == {"get", "list", "watch"}
        assert _create_status(as_member, namespace, f"{group}.m.one") == 403
        assert _create_status(as_member, namespace, f"{group}-unrelated") == 403
        # 2. The policy installed: the writes come back, confined to the Group's own Leases.
        policy.install()
        eventually(lambda: api.ready("Group", group), timeout=60, interval=0.3)
        assert _lease_verbs(api, group) >= {"create", "update", "patch", "delete"}
        eventually(lambda: _create_status(as_member, namespace, f"{group}.m.one") == 201, timeout=60, interval=0.5)
        # The policy's parameters arrive through the server's informer: wait for its 403, with a new
        # name each try (a create let through meanwhile makes the name's next try 409). The server
        # keeps a ConfigMap-parameter binding of its own (RealApiServer's PARAM_INFORMER_ANCHOR), so
        # a policy another test removed earlier has not frozen that informer.
        eventually(lambda: _create_status(as_member, namespace, _unique(f"{group}-unrelated")) == 403,
                   timeout=60, interval=0.5)
        assert _create_status(as_member, namespace, "kubecoord-operator") == 403
        # 3. The policy removed: the writes go within a resync, the Group says why.
        policy.remove()
        eventually(lambda: api.condition("Group", group, "Ready").get("reason") == "Unconfined",
                   timeout=60, interval=0.3)
        assert _lease_verbs(api, group) == {"get", "list", "watch"}
        eventually(lambda: _create_status(as_member, namespace, f"{group}.m.two") == 403, timeout=30, interval=0.3)
    finally:
        if policy.installed:
            policy.remove()


@pytest.mark.timeout(180)
def test_a_group_meeting_a_foreign_coordinator_object_reports_it_and_grants_nothing_on_it(
    operator: Operator, api: Api
) -> None:
    """A same-named ConfigMap nobody's kubecoord made (no owner, no kubecoord label) is left
    alone and reported; before, a Group took any existing one as its own."""
    name = _unique("squat")
    record = f"kubecoord-kv.{name}-gc"
    api.core.create_namespaced_config_map(api.namespace, {"metadata": {"name": record}, "data": {"mine": "1"}})
    api.create("Group", name, {"clients": [f"{name}-member"]})
    eventually(lambda: api.condition("Group", name, "Ready").get("reason") == "NotOwned", timeout=60, interval=0.3)
    assert api.condition("Group", name, "BackingObjects").get("status") == "False"
    assert record in api.condition("Group", name, "BackingObjects")["message"]
    role = api.rbac.read_namespaced_role(f"kubecoord-group-{name}", api.namespace)
    assert not [rule for rule in role.rules if record in (rule.resource_names or [])]
    kept = api.core.read_namespaced_config_map(record, api.namespace)
    assert kept.data == {"mine": "1"} and not kept.metadata.owner_references
