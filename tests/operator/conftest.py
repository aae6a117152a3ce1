"""The operator against the API emulator: CRDs installed, one kopf operator for the package.

``operator`` runs the handlers with kopf.testing.KopfRunner (``--standalone``, the
``default`` namespace) in this process for every test of this folder; KUBECONFIG points
at the emulator while it runs (kopf's login and the operator read it) and is restored
afterwards. ``k8s`` is a kubernetes ApiClient with admin rights.
"""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import kubernetes.config
import pytest
import yaml
from kopf.testing import KopfRunner

import kubecoord
from kubecoord.api import Coordinator
from kubecoord.operator import confinement, kubeapi
from kubecoord_testkit.emulator import ApiEmulator
from tests.helpers import eventually

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMESPACE = "default"

INVALID_ASSIGNMENTS = [
    ({"assignment": {"units": 4, "unitNames": ["a"]}}, "exactly one of units"),
    ({"assignment": {"units": 4, "sessionTimeoutSeconds": 20, "rebalanceTimeoutSeconds": 10}}, "at least"),
    ({"assignment": {"units": 4, "assignor": "random"}}, "Unsupported value"),
]
"""Group specs whose spec.assignment the CRD's rules refuse, with a part of the message;
the same on the emulator (test_group_assignment.py) and the real server (test_group_crd_real.py)."""

INVALID_ETCD = [
    ({"hosts": ["etcd"], "sessionTimeoutSeconds": 4, "renewDeadlineSeconds": 3}, "spec.etcd.renewDeadlineSeconds",
     "etcd.renewDeadlineSeconds must be less than sessionTimeoutSeconds - 1"),
    ({"hosts": ["etcd:65536"]}, "spec.etcd.hosts",
     "etcd.hosts entries must be HOST or HOST:PORT with PORT in 1..65535"),
    ({"hosts": ["etcd:0"]}, "spec.etcd.hosts", "PORT in 1..65535"),
    ({"hosts": []}, "spec.etcd.hosts", "should have at least 1 items"),
    ({"hosts": ["etcd"], "prefix": "/app"}, "spec.etcd.prefix", "spec.etcd.prefix in body should match"),
    ({"hosts": ["etcd"], "sessionTimeoutSeconds": 1}, "spec.etcd.sessionTimeoutSeconds", "greater than or equal to 2"),
    ({"hosts": ["etcd"], "sessionTimeoutSeconds": 2.5}, "spec.etcd.sessionTimeoutSeconds", "must be of type integer"),
    ({"hosts": ["etcd"], "secretName": "Etcd_Auth"}, "spec.etcd.secretName",
     "spec.etcd.secretName in body should match"),
    ({"hosts": ["etcd"], "tls": "yes"}, "spec.etcd.tls", "must be of type boolean"),
]
"""etcd connection settings the CRDs refuse: (spec.etcd, the field named, a part of the
message), the same on the emulator (testkit/tests/emulator/test_admission_crds.py) and the real
server (test_etcd_real.py)."""


def install_crds(client: kubernetes.client.ApiClient) -> None:
    api = kubernetes.client.ApiextensionsV1Api(client)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        try:
            api.create_custom_resource_definition(crd)
        except kubernetes.client.exceptions.ApiException as error:
            if error.status != 409:
                raise


@pytest.fixture(scope="package")
def k8s(kubeconfig_path: pathlib.Path) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig_path))
    install_crds(client)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="package")
def operator(k8s: kubernetes.client.ApiClient, kubeconfig_path: pathlib.Path) -> Iterator[KopfRunner]:
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(kubeconfig_path)
    kubeapi.reset()
    # --quiet: kopf logs every handler run at INFO to the stream it found, which outlives the
    # test that started it and prints into make test's progress lines.
    args = ["run", "--standalone", "--quiet", "--namespace", NAMESPACE, "-m", "kubecoord.operator.handlers"]
    # The emulator runs no admission plugin: no policy can confine Group clients here, so the
    # operator is told that unconfined ones are acceptable (--allow-unconfined-group-clients).
    confinement.configure(allow_unconfined=True)
    try:
        with KopfRunner(args, timeout=60) as runner:
            yield runner
    finally:
        kubeapi.reset()
        confinement.configure()
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
    assert runner.exit_code == 0, runner.output
    assert runner.exception is None


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]


FAST = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
"""Client timings of the operator tests: expiry in seconds."""


@pytest.fixture
def client(kubeconfig_path: pathlib.Path) -> Iterator[Coordinator]:
    """A kubernetes client in the operator's namespace on the emulator, closed after the test."""
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path), **FAST) as coordinator:
        yield coordinator


class Resources:
    """Create, read and delete kubecoord.dev resources and their backing objects."""

    def __init__(self, client: kubernetes.client.ApiClient) -> None:
        self.custom = kubernetes.client.CustomObjectsApi(client)
        self.core = kubernetes.client.CoreV1Api(client)
        self.coordination = kubernetes.client.CoordinationV1Api(client)
        self.rbac = kubernetes.client.RbacAuthorizationV1Api(client)

    def create(self, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": "kubecoord.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
        self.custom.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", NAMESPACE, plural, body)

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
                "kubecoord.dev", "v1alpha1", NAMESPACE, plural, name
            )
        except kubernetes.client.exceptions.ApiException as error:
            if error.status == 404:
                return None
            raise
        return obj

    def status(self, plural: str, name: str) -> dict[str, Any]:
        return dict((self.get(plural, name) or {}).get("status") or {})

    def condition(self, plural: str, name: str, kind: str) -> str | None:
        conditions = self.status(plural, name).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == kind), None)

    def delete(self, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object("kubecoord.dev", "v1alpha1", NAMESPACE, plural, name)

    def events(self, name: str) -> list[tuple[str, str]]:
        events = self.core.list_namespaced_event(NAMESPACE).items
        return [(e.reason, e.message) for e in events if e.involved_object.name == name]

    def lease_names(self) -> set[str]:
        return {lease.metadata.name for lease in self.coordination.list_namespaced_lease(NAMESPACE).items}

    def configmap_names(self) -> set[str]:
        return {cm.metadata.name for cm in self.core.list_namespaced_config_map(NAMESPACE).items}

    def role_names(self) -> set[str]:
        return {role.metadata.name for role in self.rbac.list_namespaced_role(NAMESPACE).items}

    def wait_ready(self, plural: str, name: str) -> None:
        eventually(lambda: self.condition(plural, name, "Ready") == "True", timeout=30)


@pytest.fixture
def resources(k8s: kubernetes.client.ApiClient, operator: KopfRunner) -> Resources:
    return Resources(k8s)


@pytest.fixture(scope="package")
def api(api_emulator: ApiEmulator) -> ApiEmulator:
    return api_emulator
