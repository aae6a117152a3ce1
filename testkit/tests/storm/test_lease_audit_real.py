"""The storm's audit rule on the real kube-apiserver: the operator Lease's create — the first
holder's term — is in the audit log with the Lease as stored, as every later write is, so
the judge knows who held the Lease from its first moment."""

from __future__ import annotations

import pathlib
import time

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubecoord_testkit.servers.kubernetes import BinariesNotFound, RealApiServer, find_binaries
from kubecoord_testkit.storm import judging

NAMESPACE, LEASE = "default", "kubecoord-operator"


def _states(server: RealApiServer, count: int) -> judging.AuditLog:
    """The audit log once it holds ``count`` Lease states (events are written as requests
    complete, just after the answer)."""
    deadline = time.monotonic() + 30
    while True:
        log = judging.read_audit_file(server.audit_log, lease_namespace=NAMESPACE, lease=LEASE, account="admin")
        if len(log.states) + log.unrecorded_lease_writes >= count or time.monotonic() > deadline:
            return log
        time.sleep(0.05)


def test_the_lease_create_and_its_updates_are_recorded_with_the_lease_as_stored(tmp_path: pathlib.Path) -> None:
    try:
        binaries = find_binaries()
    except BinariesNotFound as exc:
        pytest.skip(f"the real kube-apiserver is not here: {exc}")
    with RealApiServer(binaries, tmp_path / "server", audit_rules=(judging.lease_audit_rule(NAMESPACE),)) as server:
        api = k8s_config.new_client_from_config(config_file=str(server.admin_kubeconfig))  # type: ignore[no-untyped-call]
        leases = k8s.CoordinationV1Api(api)
        first = k8s.V1Lease(metadata=k8s.V1ObjectMeta(name=LEASE),
                            spec=k8s.V1LeaseSpec(holder_identity="a-1", lease_transitions=1))
        leases.create_namespaced_lease(NAMESPACE, first)
        leases.patch_namespaced_lease(LEASE, NAMESPACE, {"spec": {"holderIdentity": "b-1", "leaseTransitions": 2}})
        log = _states(server, 2)
    assert log.unrecorded_lease_writes == 0
    assert [(s.holder, s.transitions, s.created) for s in log.states] == [("a-1", 1, True), ("b-1", 2, False)]
