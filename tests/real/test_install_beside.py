"""``helm install`` beside what users already have, on a whole cluster of its own: the CRDs
applied first with ``kubectl apply -f crds/`` (as examples/README.md shows), then the
chart with its default values, then a second release in another namespace; and two
releases watching every namespace, which share one Group-client policy.

Helm refuses to adopt objects that lack its ownership metadata ("invalid ownership
metadata"), so the chart leaves out a CRD that exists under another owner
(``kubecoord.rendersCrd``), and says so in its notes; a CRD it installed itself stays
its own on upgrade."""

from __future__ import annotations

import pathlib
import subprocess

import kubernetes
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubecoord.operator import lease_grants
from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.chart import conftest as chart_fixtures
from tests.chart.conftest import CHART, run_helm
from tests.fixtures.real_kubernetes import create_namespace, minter
from tests.helpers import eventually
from tests.real.own_cluster import real_admin_api, real_api  # a cluster of its own: CRDs applied without Helm

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = ("leaderelections.kubecoord.dev", "groups.kubecoord.dev", "kvstores.kubecoord.dev")
POLICY = "kubecoord-lease-grants"
"""The Group-client policy: one per cluster, whichever release installed it."""

helm = chart_fixtures.helm
__all__ = ["real_admin_api", "real_api"]  # the fixtures this module overrides


def _owner(admin_api: k8s.ApiClient, name: str) -> str | None:
    crd = k8s.ApiextensionsV1Api(admin_api).read_custom_resource_definition(name)
    assert crd.metadata is not None
    return (crd.metadata.annotations or {}).get("meta.helm.sh/release-name")


def test_helm_install_after_kubectl_apply_of_the_crds_and_a_second_release(
    helm: pathlib.Path, kubectl: pathlib.Path, real_api: RealApiServer, real_admin_api: k8s.ApiClient
) -> None:
    admin = ["--kubeconfig", str(real_api.admin_kubeconfig)]
    applied = subprocess.run([str(kubectl), *admin, "apply", "-f", str(ROOT / "crds")], capture_output=True,
                             text=True, timeout=120, check=False)
    assert applied.returncode == 0, applied.stderr
    first, second = create_namespace(real_admin_api, "kc-first"), create_namespace(real_admin_api, "kc-second")
    wait = ["--wait"] if real_api.cluster else []

    installed = run_helm(helm, "install", "kc", str(CHART), "--namespace", first, *admin, "--timeout", "120s", *wait)
    assert installed.returncode == 0, installed.stderr  # before: "invalid ownership metadata"
    assert "CRDs left to their owner" in installed.stdout and "kvstores.kubecoord.dev" in installed.stdout
    assert [_owner(real_admin_api, name) for name in CRDS] == [None, None, None]  # still kubectl's

    upgraded = run_helm(helm, "upgrade", "kc", str(CHART), "--namespace", first, *admin, "--timeout", "120s")
    assert upgraded.returncode == 0, upgraded.stderr

    again = run_helm(helm, "install", "kc2", str(CHART), "--namespace", second, *admin, "--timeout", "120s",
                     "--set", "operator.allNamespaces=false", *wait)
    assert again.returncode == 0, again.stderr
    # The namespaced release binds the first one's policy, in its own namespace only.
    assert "exists already (another release" in again.stdout
    binding = k8s.AdmissionregistrationV1Api(real_admin_api).read_validating_admission_policy_binding(
        "kc2-kubecoord-lease-grants")
    assert binding.spec is not None and binding.spec.match_resources is not None
    selector = binding.spec.match_resources.namespace_selector
    assert selector is not None and selector.match_expressions is not None
    assert [(e.key, e.operator, e.values) for e in selector.match_expressions] == [
        ("kubernetes.io/metadata.name", "In", [second])]

    for release, namespace in (("kc2", second), ("kc", first)):
        removed = run_helm(helm, "uninstall", release, "--namespace", namespace, *admin, "--timeout", "60s")
        assert removed.returncode == 0, removed.stderr
    extensions = k8s.ApiextensionsV1Api(real_admin_api)
    assert all(extensions.read_custom_resource_definition(name) for name in CRDS)  # kubectl's, left in place


def _delete_policy(admin_api: k8s.ApiClient) -> None:
    """The kept Group-client policy an earlier test's releases left (so the next release installs it)."""
    try:
        k8s.AdmissionregistrationV1Api(admin_api).delete_validating_admission_policy(POLICY)
    except ApiException as error:
        if error.status != 404:
            raise


def _lease_create(leases: k8s.CoordinationV1Api, namespace: str, name: str) -> int:
    try:
        leases.create_namespaced_lease(namespace, {"metadata": {"name": name}, "spec": {}})
    except ApiException as error:
        return int(error.status)
    return 201


def test_two_cluster_wide_releases_share_one_policy_and_either_uninstalled_leaves_the_other_confining(
    helm: pathlib.Path, real_api: RealApiServer, real_admin_api: k8s.ApiClient, tmp_path: pathlib.Path
) -> None:
    """One Group-client policy for two releases that watch every namespace (each binds it with
    its own binding); uninstalling the one that installed it leaves the policy (kept) and the
    other's binding, so a Group client there is still confined to its grants."""
    admin = ["--kubeconfig", str(real_api.admin_kubeconfig)]
    _delete_policy(real_admin_api)
    admission = k8s.AdmissionregistrationV1Api(real_admin_api)
    first, second = create_namespace(real_admin_api, "wide-a"), create_namespace(real_admin_api, "wide-b")
    installed = run_helm(helm, "install", "wide1", str(CHART), "--namespace", first, *admin, "--timeout", "120s",
                         "--set", "crds.enabled=false")
    assert installed.returncode == 0, installed.stderr
    again = run_helm(helm, "install", "wide2", str(CHART), "--namespace", second, *admin, "--timeout", "120s",
                     "--set", "crds.enabled=false")
    assert again.returncode == 0, again.stderr  # a duplicate of Helm's would fail: "invalid ownership metadata"
    assert f"ValidatingAdmissionPolicy {POLICY} exists already" in again.stdout
    policies = [p.metadata.name for p in admission.list_validating_admission_policy().items if p.metadata
                and p.metadata.name and p.metadata.name.endswith("lease-grants")]
    assert policies == [POLICY]  # not one per release
    policy = admission.read_validating_admission_policy(POLICY)
    assert policy.metadata is not None and (policy.metadata.annotations or {})[
        "meta.helm.sh/release-name"] == "wide1"
    for release in ("wide1", "wide2"):
        binding = admission.read_validating_admission_policy_binding(f"{release}-kubecoord-lease-grants")
        assert binding.spec is not None and binding.spec.policy_name == POLICY

    # A Group client in an application namespace: RBAC lets it write every Lease, its grants one.
    apps = create_namespace(real_admin_api, "wide-apps")
    core, rbac = k8s.CoreV1Api(real_admin_api), k8s.RbacAuthorizationV1Api(real_admin_api)
    core.create_namespaced_config_map(apps, {"metadata": {"name": lease_grants.CONFIGMAP},
                                             "data": {"member": "mine.m.*"}})
    rbac.create_namespaced_role(apps, {"metadata": {"name": "leases"}, "rules": [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "delete"]}]})
    rbac.create_namespaced_role_binding(apps, {
        "metadata": {"name": "leases"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                    "name": "leases"},
        "subjects": [{"kind": "ServiceAccount", "name": "member", "namespace": apps}]})
    mint = minter(real_api, real_admin_api, tmp_path)
    as_member = k8s.CoordinationV1Api(kubernetes.config.new_client_from_config(config_file=str(mint(apps, "member"))))
    tries = iter(range(10_000))

    def confined() -> bool:  # the server reads the parameters through an informer: a new name per try
        return _lease_create(as_member, apps, f"theirs-{next(tries)}") == 403

    eventually(confined, 60, interval=0.2)
    removed = run_helm(helm, "uninstall", "wide1", "--namespace", first, *admin, "--timeout", "60s")
    assert removed.returncode == 0, removed.stderr
    assert "kept" in removed.stdout + removed.stderr and POLICY in removed.stdout + removed.stderr
    admission.read_validating_admission_policy(POLICY)  # kept for wide2's binding
    eventually(lambda: not _binding_exists(admission, "wide1-kubecoord-lease-grants"), 30, interval=0.2)
    assert _lease_create(as_member, apps, "theirs-after") == 403
    assert _lease_create(as_member, apps, "mine.m.after") == 201

    # The other way round: wide1 again (it finds the kept policy as its own and adopts it), then
    # wide2 uninstalled: wide1 still confines.
    installed = run_helm(helm, "install", "wide1", str(CHART), "--namespace", first, *admin, "--timeout", "120s",
                         "--set", "crds.enabled=false")
    assert installed.returncode == 0, installed.stderr
    assert "exists already" not in installed.stdout  # its own
    removed = run_helm(helm, "uninstall", "wide2", "--namespace", second, *admin, "--timeout", "60s")
    assert removed.returncode == 0, removed.stderr
    eventually(lambda: not _binding_exists(admission, "wide2-kubecoord-lease-grants"), 30, interval=0.2)
    assert _binding_exists(admission, "wide1-kubecoord-lease-grants")
    assert _lease_create(as_member, apps, "theirs-after-wide2") == 403
    assert _lease_create(as_member, apps, "mine.m.after-wide2") == 201
    removed = run_helm(helm, "uninstall", "wide1", "--namespace", first, *admin, "--timeout", "60s")
    assert removed.returncode == 0, removed.stderr
    _delete_policy(real_admin_api)


def _binding_exists(admission: k8s.AdmissionregistrationV1Api, name: str) -> bool:
    try:
        admission.read_validating_admission_policy_binding(name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_a_release_that_installed_the_crds_keeps_rendering_them(
    helm: pathlib.Path, real_api: RealApiServer, real_admin_api: k8s.ApiClient
) -> None:
    """On its own upgrade the release still owns its CRDs (a third release leaves them)."""
    admin = ["--kubeconfig", str(real_api.admin_kubeconfig)]
    extensions = k8s.ApiextensionsV1Api(real_admin_api)
    for name in CRDS:  # the previous test's, applied with kubectl (when it ran first)
        try:
            extensions.delete_custom_resource_definition(name)
        except ApiException as error:
            if error.status != 404:
                raise

    def gone() -> bool:
        names = {crd.metadata.name for crd in extensions.list_custom_resource_definition().items if crd.metadata}
        return not names & set(CRDS)

    eventually(gone, 60, interval=0.2)
    namespace = create_namespace(real_admin_api, "kc-owner")
    installed = run_helm(helm, "install", "owner", str(CHART), "--namespace", namespace, *admin, "--timeout", "120s")
    assert installed.returncode == 0, installed.stderr
    assert [_owner(real_admin_api, name) for name in CRDS] == ["owner"] * 3
    upgraded = run_helm(helm, "upgrade", "owner", str(CHART), "--namespace", namespace, *admin, "--timeout", "120s",
                        "--dry-run=server")
    assert upgraded.returncode == 0, upgraded.stderr
    assert upgraded.stdout.count("kind: CustomResourceDefinition") == 3  # its own: still rendered
