"""Admission of the project's own CRDs (crds/) and examples (examples/): what a user of
`kubectl apply` meets, checked without a server."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.operator.conftest import INVALID_ETCD

from kubecoord_testkit.emulator.admission import Invalid, admit

ROOT = Path(__file__).resolve().parents[3]
CRDS = {
    crd["spec"]["names"]["kind"]: crd for crd in (yaml.safe_load(p.read_text()) for p in (ROOT / "crds").glob("*.yaml"))
}


def resource(kind: str, spec: dict[str, Any], name: str = "billing") -> dict[str, Any]:
    return {
        "apiVersion": "kubecoord.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def refusal(kind: str, spec: dict[str, Any], name: str = "billing") -> tuple[str, list[str]]:
    with pytest.raises(Invalid) as caught:
        admit(CRDS[kind], resource(kind, spec, name), None, None)
    status = caught.value.status
    assert status["code"] == 422 and status["reason"] == "Invalid"
    return status["message"], [c["field"] for c in status["details"]["causes"]]


def test_all_three_kinds_are_known() -> None:
    assert set(CRDS) == {"LeaderElection", "Group", "KVStore"}


@pytest.mark.parametrize("path", sorted((ROOT / "examples").rglob("*.yaml")), ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_are_admitted_or_refused_as_their_folder_says(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") not in CRDS:
            continue
        if path.parent.name == "invalid":
            with pytest.raises(Invalid):
                admit(CRDS[doc["kind"]], doc, None, None)
        else:
            stored = admit(CRDS[doc["kind"]], doc, None, None)
            assert stored["spec"].items() >= doc["spec"].items()


def test_leader_election_defaults() -> None:
    stored = admit(CRDS["LeaderElection"], resource("LeaderElection", {}), None, None)
    assert stored["spec"] == {
        "backend": "kubernetes",
        "leaseDurationSeconds": 15,
        "renewDeadlineSeconds": 10,
        "retryPeriodSeconds": 2,
    }


def test_zookeeper_defaults_fill_the_connection_settings() -> None:
    spec = {"backend": "zookeeper", "zookeeper": {"hosts": ["zk-0.zk:2181"]}}
    stored = admit(CRDS["Group"], resource("Group", spec), None, None)
    assert stored["spec"]["zookeeper"] == {
        "hosts": ["zk-0.zk:2181"],
        "chroot": "/kubecoord",
        "sessionTimeoutSeconds": 10,
    }


def test_renew_deadline_must_be_shorter_than_the_lease() -> None:
    message, fields = refusal("LeaderElection", {"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10})
    assert fields == ["spec.renewDeadlineSeconds"]
    assert message.startswith(
        'LeaderElection.kubecoord.dev "billing" is invalid: spec.renewDeadlineSeconds: Invalid value: "object": '
        "renewDeadlineSeconds must be less than leaseDurationSeconds"
    )


def test_zookeeper_backend_needs_its_connection_settings() -> None:
    for kind in CRDS:
        message, fields = refusal(kind, {"backend": "zookeeper"})
        assert fields == ["spec.zookeeper"], kind
        assert "spec.zookeeper: Required value: spec.zookeeper is required when spec.backend is zookeeper" in message


def test_cassandra_defaults_fill_the_connection_settings() -> None:
    spec = {"backend": "cassandra", "cassandra": {"hosts": ["db-0.db", "db-1.db:9142"]}}
    for kind in CRDS:
        stored = admit(CRDS[kind], resource(kind, spec), None, None)
        assert stored["spec"]["cassandra"] == {
            "hosts": ["db-0.db", "db-1.db:9142"],
            "keyspace": "kubecoord",
            "consistency": "QUORUM",
            "serialConsistency": "SERIAL",
            "sessionTimeoutSeconds": 10,
        }, kind


def test_cassandra_backend_needs_its_connection_settings_and_only_with_it() -> None:
    for kind in CRDS:
        message, fields = refusal(kind, {"backend": "cassandra"})
        assert fields == ["spec.cassandra"], kind
        assert "spec.cassandra is required when spec.backend is cassandra" in message
        message, fields = refusal(kind, {"backend": "kubernetes", "cassandra": {"hosts": ["db:9042"]}})
        assert fields == ["spec.cassandra"], kind


@pytest.mark.parametrize(
    ("cassandra", "field"),
    [
        (
            {"hosts": ["db"], "sessionTimeoutSeconds": 4, "renewDeadlineSeconds": 3},
            "spec.cassandra.renewDeadlineSeconds",
        ),
        ({"hosts": ["db"], "keyspace": "no-dashes"}, "spec.cassandra.keyspace"),
        ({"hosts": ["db"], "consistency": "ONE"}, "spec.cassandra.consistency"),
        ({"hosts": ["db"], "sessionTimeoutSeconds": 1}, "spec.cassandra.sessionTimeoutSeconds"),
        ({"hosts": ["db:99999999"]}, "spec.cassandra.hosts[0]"),
    ],
)
def test_cassandra_settings_are_checked(cassandra: dict[str, Any], field: str) -> None:
    _, fields = refusal("LeaderElection", {"backend": "cassandra", "cassandra": cassandra})
    assert fields == [field]


def test_etcd_defaults_fill_the_connection_settings() -> None:
    spec = {"backend": "etcd", "etcd": {"hosts": ["etcd-0.etcd", "etcd-1.etcd:2379"], "secretName": "etcd-auth"}}
    for kind in CRDS:
        stored = admit(CRDS[kind], resource(kind, spec), None, None)
        assert stored["spec"]["etcd"] == {
            "hosts": ["etcd-0.etcd", "etcd-1.etcd:2379"],
            "prefix": "kubecoord",
            "sessionTimeoutSeconds": 10,
            "tls": False,
            "secretName": "etcd-auth",
        }, kind


def test_etcd_backend_needs_its_connection_settings_and_only_with_it() -> None:
    for kind in CRDS:
        message, fields = refusal(kind, {"backend": "etcd"})
        assert fields == ["spec.etcd"], kind
        assert "spec.etcd: Required value: spec.etcd is required when spec.backend is etcd" in message
        message, fields = refusal(kind, {"backend": "cassandra", "cassandra": {"hosts": ["db"]},
                                         "etcd": {"hosts": ["etcd:2379"]}})
        assert fields == ["spec.etcd"], kind


@pytest.mark.parametrize(("etcd", "field", "message"), INVALID_ETCD)
def test_etcd_settings_are_checked(etcd: dict[str, Any], field: str, message: str) -> None:
    for kind in CRDS:
        text, fields = refusal(kind, {"backend": "etcd", "etcd": etcd})
        # (a type error also leaves rules unchecked: a cause without a field, as kube-apiserver's)
        assert [named for named in fields if named] == [field], kind
        assert message in text, text


def test_unknown_backend() -> None:
    message, fields = refusal("KVStore", {"backend": "consul"})
    assert fields == ["spec.backend"]
    assert 'Unsupported value: "consul": supported values: "kubernetes", "zookeeper", "cassandra", "etcd"' in message


def test_negative_size_limit() -> None:
    message, fields = refusal("KVStore", {"sizeLimit": "-1Mi"})
    assert fields == ["spec.sizeLimit"]
    assert 'spec.sizeLimit: Invalid value: "-1Mi": spec.sizeLimit in body should match' in message


def test_group_renew_interval_at_most_half_the_lease() -> None:
    _, fields = refusal("Group", {"leaseDurationSeconds": 4, "renewIntervalSeconds": 3})
    assert fields == ["spec.renewIntervalSeconds"]


def test_name_must_be_a_dns_label() -> None:
    message, fields = refusal("KVStore", {}, name="topics.v2")
    assert fields == [""]
    assert "metadata.name must be a DNS-1123 label" in message


def test_backend_is_immutable() -> None:
    crd = CRDS["LeaderElection"]
    old = admit(crd, resource("LeaderElection", {}), None, None)
    new = copy.deepcopy(old)
    new["spec"]["backend"] = "zookeeper"
    new["spec"]["zookeeper"] = {"hosts": ["zk:2181"]}
    with pytest.raises(Invalid) as caught:
        admit(crd, new, old, None)
    assert [c["field"] for c in caught.value.status["details"]["causes"]] == ["spec.backend"]
    assert "backend is immutable" in caught.value.status["message"]


def test_status_written_by_the_operator_is_validated() -> None:
    crd = CRDS["LeaderElection"]
    old = admit(crd, resource("LeaderElection", {}), None, None)
    good = {**old, "status": {"leader": "pod-a", "epoch": 3, "renewTime": "2026-11-22T22:00:00.000000Z"}}
    assert admit(crd, good, old, "status")["status"]["epoch"] == 3
    bad = {**old, "status": {"epoch": "three"}}
    with pytest.raises(Invalid) as caught:
        admit(crd, bad, old, "status")
    assert caught.value.status["details"]["causes"][0]["field"] == "status.epoch"
