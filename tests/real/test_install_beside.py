"""``helm install`` beside what users already have, on a whole cluster of its own: the CRDs
applied first with ``kubectl apply -f crds/`` (as examples/README.md shows), then the
chart with its default values, then a second release in another namespace.

Helm refuses to adopt objects that lack its ownership metadata ("invalid ownership
metadata"), so the chart leaves out a CRD that exists under another owner
(``kubecoord.rendersCrd``), and says so in its notes; a CRD it installed itself stays
its own on upgrade."""

from __future__ import annotations

import pathlib
import subprocess

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.chart import conftest as chart_fixtures
from tests.chart.conftest import CHART, run_helm
from tests.fixtures.real_kubernetes import create_namespace
from tests.helpers import eventually
from tests.real.own_cluster import real_admin_api, real_api  # a cluster of its own: CRDs applied without Helm

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = ("leaderelections.kubecoord.dev", "groups.kubecoord.dev", "kvstores.kubecoord.dev")

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
    # The namespaced release's admission policy binds in its own namespace only.
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
