"""Operator-computed assignment (Group ``spec.assignment``) end to end on the real
kube-apiserver: ``kubecoord operator`` runs as a process of its own, members run as
processes of their own (tests/group_coordinator/member_process.py) and join, leave (SIGTERM)
and are killed with -9. On a kubernetes-backed Group and on a zookeeper-backed one (the
real ZooKeeper server; the operator leads that group over its own session), side by side.

After every change the test waits for the Group's status to show a stable generation in
which every live member has its units and the member processes agree, then checks: the
generation grew; no unit belonged to two members, in any status the test saw nor in the
processes' own reports (who worked on what, and when); RebalanceCompleted was recorded
for the generation; ``kubectl get kcg`` (the server's Table) prints it and Stable.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import kubecoord
from kubecoord.wire.group_record import derived_name
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.fixtures.real_kubernetes import install_crds, running_operator
from tests.group_coordinator.checks import holders, violations
from tests.group_coordinator.members import Group, ProcessMember
from tests.helpers import eventually

pytestmark = pytest.mark.slow

API = ("kubecoord.dev", "v1alpha1")
UNITS = [str(i) for i in range(12)]
SESSION = 1.5
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"


@pytest.fixture(scope="module")
def operator_process(
    real_admin_api: k8s.ApiClient, real_kubeconfig: pathlib.Path, real_namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[subprocess.Popen[bytes]]:
    """``kubecoord operator`` for this module's namespace, as a process (admin rights)."""
    install_crds(real_admin_api)
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    # The operator's own HA Lease at the defaults' scale: no step of the scenario depends
    # on it, and a 2 s renew deadline was missed at load 15 (the operator lost its Lease 6 s
    # after starting, stopped reconciling, and the Group never settled). The members'
    # timings, which the scenario exercises, stay short.
    with running_operator(real_kubeconfig, real_namespace, "gc-operator", log,
                          "--lease-duration", "15", "--renew-deadline", "10", "--retry-period", "2") as process:
        yield process


class Observer:
    """Polls the Group's status in the background and keeps every distinct one."""

    def __init__(self, custom: k8s.CustomObjectsApi, namespace: str, name: str) -> None:
        self.custom, self.namespace, self.name = custom, namespace, name
        self.seen: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def status(self) -> dict[str, Any]:
        body = self.custom.get_namespaced_custom_object(*API, self.namespace, "groups", self.name)
        return dict(body.get("status") or {})

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                status = self.status()
            except (ApiException, OSError):
                continue
            if not self.seen or status != self.seen[-1]:
                self.seen.append(status)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _owners(status: dict[str, Any]) -> dict[str, list[str]]:
    """unit -> every member the status lists it under."""
    owners: dict[str, list[str]] = {}
    for member in status.get("members") or []:
        for unit in member.get("units") or []:
            owners.setdefault(unit, []).append(member["id"])
    return owners


def _table(admin_api: k8s.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """What ``kubectl get kcg NAME`` prints: the server's Table for the Group."""
    url = f"{admin_api.configuration.host}/apis/{API[0]}/{API[1]}/namespaces/{namespace}/groups/{name}"
    response = admin_api.call_api("GET", url, header_params={"Accept": TABLE})  # client-certificate auth
    response.read()
    table: dict[str, Any] = json.loads(response.data)
    return table


@pytest.mark.timeout(240)
def test_operator_assigns_units_to_member_processes(
    zookeeper_server: ZooKeeperServer, real_admin_api: k8s.ApiClient, real_kubeconfig: pathlib.Path,
    real_namespace: str, operator_process: subprocess.Popen[bytes],
) -> None:
    """Both Groups at once (they share only the operator, as groups of one namespace do);
    each scenario mostly waits for expiries, so together they take as long as the longer."""
    failures: dict[str, BaseException] = {}

    def run(backend: str) -> None:
        try:
            _scenario(backend, zookeeper_server.hosts, real_admin_api, real_kubeconfig, real_namespace)
        except BaseException as exc:  # reported below, with its traceback
            failures[backend] = exc

    threads = [threading.Thread(target=run, args=(backend,)) for backend in ("kubernetes", "zookeeper")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for backend, exc in failures.items():
        raise AssertionError(f"the {backend}-backed Group: {exc}") from exc


def _scenario(
    backend: str, zookeeper_hosts: str, real_admin_api: k8s.ApiClient, real_kubeconfig: pathlib.Path,
    real_namespace: str,
) -> None:
    custom = k8s.CustomObjectsApi(real_admin_api)
    name = f"gc-{backend[:4]}-{uuid.uuid4().hex[:6]}"
    spec: dict[str, Any] = {
        "leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5,
        "assignment": {"units": len(UNITS), "assignor": "sticky", "sessionTimeoutSeconds": SESSION,
                       "rebalanceTimeoutSeconds": 20},
    }
    if backend == "zookeeper":
        hosts = zookeeper_hosts
        chroot = f"gc-{uuid.uuid4().hex[:8]}"
        spec |= {"backend": "zookeeper", "zookeeper": {"hosts": [hosts], "chroot": f"/{chroot}",
                                                        "sessionTimeoutSeconds": 2}}
        connection: dict[str, Any] = {"url": f"zookeeper://{hosts}/{chroot}", "options": {"lease_duration": 2.0}}
    else:
        connection = {"url": f"kubernetes://{real_namespace}", "options": {
            "kubeconfig": str(real_kubeconfig), "lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}}
    config = {**connection, "units": [], "assignors": ["sticky"], "session": SESSION}
    body = {"apiVersion": "/".join(API), "kind": "Group", "metadata": {"name": name}, "spec": spec}
    custom.create_namespaced_custom_object(*API, real_namespace, "groups", body)
    observer = Observer(custom, real_namespace, name)
    group = Group(UNITS, name)
    members: dict[str, ProcessMember] = {}
    names = (f"m{i}" for i in range(100))

    def spawn() -> None:
        member = next(names)
        members[member] = ProcessMember(group, member, config)

    def settled() -> bool:
        status = observer.status()
        if status.get("phase") != "Stable" or sorted(m["id"] for m in status.get("members") or []) != sorted(members):
            return False
        owners = _owners(status)
        counts = [len(m.get("units") or []) for m in status["members"]]
        return (
            sorted(owners) == sorted(UNITS) and max(counts) - min(counts) <= 1
            and holders(group.snapshot(), group.killed) == {u: ids[0] for u, ids in owners.items()}
        )

    generations: list[int] = []

    def check_settled() -> None:
        eventually(settled, 90, interval=0.2)
        status = observer.status()
        assert status["assignedBy"] == "operator" and status["leader"] == "kubecoord-operator"
        assert status["protocol"] == "sticky"
        assert not generations or status["generation"] > generations[-1]
        generations.append(status["generation"])
        assert violations(group.snapshot(), group.killed) == []
        table = _table(real_admin_api, real_namespace, name)
        columns = [column["name"] for column in table["columnDefinitions"]]
        cells = table["rows"][0]["cells"]
        assert cells[columns.index("Generation")] == status["generation"]
        assert cells[columns.index("Phase")] == "Stable"
        assert cells[columns.index("Members")] == len(members)

    try:
        eventually(lambda: any(c.get("type") == "Ready" and c.get("status") == "True"
                               for c in observer.status().get("conditions") or []), 60, interval=0.2)
        for _ in range(3):
            spawn()
        check_settled()
        for action in ("join", "leave", "kill"):
            victim = sorted(members)[0]
            if action == "join":
                spawn()
            elif action == "leave":
                members.pop(victim).leave()
            else:
                members.pop(victim).kill()
            check_settled()
    finally:
        observer.stop()
        for member in members.values():
            member.kill()

    assert any(line["e"] == "work" for line in group.snapshot())
    seen = [status for status in observer.seen if "generation" in status]
    assert [s["generation"] for s in seen] == sorted(s["generation"] for s in seen)  # never backwards
    for status in seen:
        assert all(len(ids) == 1 for ids in _owners(status).values()), status

    def recorded() -> set[str]:
        events = k8s.CoreV1Api(real_admin_api).list_namespaced_event(real_namespace).items
        return {f"{e.reason}: {e.message}" for e in events if e.involved_object.name == name}

    def every_generation_recorded() -> bool:
        found = recorded()
        return all(
            any(text.startswith(f"RebalanceCompleted: generation {g} ") for text in found) for g in generations
        ) and any(text.startswith("RebalanceStarted: ") for text in found)

    eventually(every_generation_recorded, 30, interval=0.5)

    if backend == "zookeeper":
        # Deleting the Group: the finalizer purges the group coordinator's record and election too.
        custom.delete_namespaced_custom_object(*API, real_namespace, "groups", name)
        eventually(lambda: name not in {g["metadata"]["name"] for g in custom.list_namespaced_custom_object(
            *API, real_namespace, "groups")["items"]}, 60, interval=0.2)
        with kubecoord.connect(connection["url"]) as coordinator:
            purge = coordinator.purge  # type: ignore[attr-defined]
            assert purge("kv", derived_name(name)) == 0
            assert purge("leader_election", derived_name(name)) == 0
            assert purge("group", name) == 0
