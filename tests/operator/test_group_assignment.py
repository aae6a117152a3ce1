"""Group coordinator status and operator-computed assignment (spec.assignment) against
the API emulator, with the operator running."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import kubernetes.client
import pytest

import kubecoord
from kubecoord.group_coordinator import GroupMember, UnitsProtocol, decode_units
from kubecoord_testkit.emulator import ApiEmulator
from tests.helpers import eventually
from tests.operator.conftest import INVALID_ASSIGNMENTS, NAMESPACE, Resources

FAST = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}


@pytest.fixture
def connect(kubeconfig_path: pathlib.Path) -> Iterator[object]:
    opened: list[kubecoord.Coordinator] = []

    def make() -> kubecoord.Coordinator:
        coordinator = kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path), **FAST)
        opened.append(coordinator)
        return coordinator

    yield make
    for coordinator in opened:
        coordinator.close()


def _member(connect: object, name: str, member_id: str, assignors: list[str]) -> GroupMember:
    coordinator = connect()  # type: ignore[operator]
    member = coordinator.group_coordinator(
        name, UnitsProtocol([], assignors=assignors), member_id=member_id, session_timeout=1.0, rebalance_timeout=10.0
    )
    assert isinstance(member, GroupMember)
    member.join()
    return member


def _units(member: GroupMember) -> list[str]:
    return decode_units(member.assignment or b"")[0]


def test_operator_assigns_the_spec_units(resources: Resources, connect: object, unique: str) -> None:
    name = f"assigned-{unique}"
    spec = {
        "leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5,
        "assignment": {"units": 8, "assignor": "sticky", "sessionTimeoutSeconds": 1, "rebalanceTimeoutSeconds": 10},
    }
    resources.create("groups", "Group", name, spec)
    resources.wait_ready("groups", name)
    # The members offer range only: the operator's assignor decides (KIP-848).
    a = _member(connect, name, "a", ["range"])
    b = _member(connect, name, "b", ["range"])

    def settled() -> bool:
        status = resources.status("groups", name)
        counts = sorted(m.get("unitCount", -1) for m in status.get("members") or [])
        return status.get("phase") == "Stable" and counts == [4, 4]

    eventually(settled, timeout=30)
    status = resources.status("groups", name)
    assert status["assignedBy"] == "operator" and status["leader"] == "kubecoord-operator"
    assert status["protocol"] == "sticky" and status["generation"] >= 1
    eventually(lambda: a.is_stable() and b.is_stable() and a.generation == b.generation, timeout=20)
    assert sorted(_units(a) + _units(b)) == sorted(str(i) for i in range(8))
    assert a.protocol_name == "sticky"
    description = a.describe()
    assert description is not None and description.leader == "kubecoord-operator"
    eventually(lambda: any(r == "RebalanceCompleted" for r, _ in resources.events(name)), timeout=20)
    assert any(r == "RebalanceStarted" for r, _ in resources.events(name))

    generation = a.generation
    b.leave()
    eventually(lambda: a.is_stable() and a.generation > generation and len(_units(a)) == 8, timeout=30)
    eventually(lambda: [m.get("unitCount") for m in resources.status("groups", name)["members"]] == [8], timeout=20)
    a.leave()
    resources.delete("groups", name)
    eventually(lambda: resources.get("groups", name) is None, timeout=30)


def test_member_led_group_status_shows_the_generation(resources: Resources, connect: object, unique: str) -> None:
    name = f"led-{unique}"
    resources.create("groups", "Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5})
    resources.wait_ready("groups", name)
    coordinator = connect()  # type: ignore[operator]
    member = coordinator.group_coordinator(name, UnitsProtocol(["x", "y"]), member_id="solo", session_timeout=1.0)
    member.join(timeout=20)
    eventually(lambda: resources.status("groups", name).get("phase") == "Stable", timeout=20)
    status = resources.status("groups", name)
    assert status["assignedBy"] == "members" and status["leader"] == "solo"
    assert status["generation"] == member.generation
    assert status["members"][0]["units"] == ["x", "y"]
    member.leave()
    resources.delete("groups", name)
    eventually(lambda: resources.get("groups", name) is None, timeout=30)


@pytest.mark.parametrize(
    ("spec", "message"),
    INVALID_ASSIGNMENTS,
)
def test_invalid_assignment_is_refused(
    k8s: kubernetes.client.ApiClient, unique: str, spec: dict[str, object], message: str
) -> None:
    custom = kubernetes.client.CustomObjectsApi(k8s)
    body = {
        "apiVersion": "kubecoord.dev/v1alpha1", "kind": "Group", "metadata": {"name": f"bad-{unique}"}, "spec": spec
    }
    with pytest.raises(kubernetes.client.exceptions.ApiException) as error:
        custom.create_namespaced_custom_object("kubecoord.dev", "v1alpha1", NAMESPACE, "groups", body)
    assert error.value.status == 422 and message in str(error.value.body)


def test_a_client_of_the_group_runs_the_coordinator_with_only_its_role(
    resources: Resources, api: ApiEmulator, unique: str, tmp_path: pathlib.Path
) -> None:
    """spec.clients is enough: the Group's Role covers the members' Leases, the election
    NAME-gc and the record's ConfigMap (created by the operator); another account is denied."""
    name = f"rbac-gc-{unique}"
    account = f"gc-{unique}"
    resources.core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": account}})
    resources.create("groups", "Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5,
                                               "clients": [account]})
    resources.wait_ready("groups", name)
    eventually(lambda: f"kubecoord-kv.{name}-gc" in resources.configmap_names(), timeout=20)
    eventually(lambda: f"kubecoord-group-{name}" in resources.role_names(), timeout=20)
    allowed = api.write_kubeconfig(
        tmp_path / "allowed", namespace=NAMESPACE, token=api.token_for_service_account(NAMESPACE, account)
    )
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(allowed), **FAST) as coordinator:
        member = coordinator.group_coordinator(name, UnitsProtocol(["a", "b"]), member_id="m", session_timeout=1.0)
        member.join(timeout=30)
        assert decode_units(member.assignment or b"")[0] == ["a", "b"]
        member.leave()
    denied = api.write_kubeconfig(
        tmp_path / "denied", namespace=NAMESPACE, token=api.token_for_service_account(NAMESPACE, f"other-{unique}")
    )
    with (
        kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(denied), **FAST) as coordinator,
        pytest.raises(kubecoord.PermissionDeniedError),
    ):
        coordinator.group_coordinator(name, UnitsProtocol(["a"]), member_id="x", session_timeout=1.0).join()
    resources.delete("groups", name)
    eventually(lambda: resources.get("groups", name) is None, timeout=30)
    eventually(lambda: f"kubecoord-kv.{name}-gc" not in resources.configmap_names(), timeout=30)


def test_operator_assignment_with_cooperative_members(resources: Resources, connect: object, unique: str) -> None:
    """KIP-429 under the operator: a newcomer gets units only after their owners revoked
    them (their follow-up rejoin), and the first members never lose what stays."""
    name = f"coop-{unique}"
    spec = {
        "leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5,
        "assignment": {"units": 6, "assignor": "cooperative-sticky", "sessionTimeoutSeconds": 1,
                       "rebalanceTimeoutSeconds": 10},
    }
    resources.create("groups", "Group", name, spec)
    resources.wait_ready("groups", name)
    first = [_member(connect, name, m, ["cooperative-sticky"]) for m in ("a", "b")]
    eventually(lambda: all(m.is_stable() for m in first) and sorted(len(_units(m)) for m in first) == [3, 3], 30)
    kept = {m.member_id: set(_units(m)) for m in first}
    third = _member(connect, name, "c", ["cooperative-sticky"])
    everyone = [*first, third]
    eventually(lambda: all(m.is_stable() for m in everyone) and [len(_units(m)) for m in everyone] == [2, 2, 2], 30)
    for member in first:
        assert set(_units(member)) <= kept[member.member_id]
    assert sorted(u for m in everyone for u in _units(m)) == [str(i) for i in range(6)]
    for member in everyone:
        member.leave()
    resources.delete("groups", name)


def test_operator_assigns_4096_unit_names_of_100_characters(resources: Resources, connect: object, unique: str) -> None:
    """The CRD's bounds (failed before: the record passed the value limit): the members,
    which share the Group's unitNames, get the units as index runs; status names them."""
    name = f"long-{unique}"
    names = [f"{i:04d}-" + "u" * 95 for i in range(4096)]
    spec = {
        "leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5,
        "assignment": {"unitNames": names, "assignor": "sticky", "sessionTimeoutSeconds": 1,
                       "rebalanceTimeoutSeconds": 10},
    }
    resources.create("groups", "Group", name, spec)
    resources.wait_ready("groups", name)
    members = []
    for member_id in ("a", "b", "c"):
        coordinator = connect()  # type: ignore[operator]
        member = coordinator.group_coordinator(
            name, UnitsProtocol(names), member_id=member_id, session_timeout=1.0, rebalance_timeout=10.0
        )
        assert isinstance(member, GroupMember)
        member.join()
        members.append(member)

    def shares(group: list[GroupMember]) -> list[int] | None:
        if not all(m.is_stable() for m in group) or len({m.generation for m in group}) != 1:
            return None
        got = [decode_units(m.assignment or b"", names)[0] for m in group]
        return sorted(len(g) for g in got) if sorted(u for g in got for u in g) == names else None

    eventually(lambda: shares(members) == [1365, 1365, 1366], timeout=60)
    eventually(lambda: sorted(m.get("unitCount", -1) for m in resources.status("groups", name)["members"])
               == [1365, 1365, 1366], timeout=30)
    members[2].leave()
    eventually(lambda: shares(members[:2]) == [2048, 2048], timeout=60)
    for member in members[:2]:
        member.leave()
    resources.delete("groups", name)
    eventually(lambda: resources.get("groups", name) is None, timeout=30)
