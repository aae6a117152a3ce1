"""The kubernetes backend feeds the client-library metrics (kubecoord.metrics)."""

from __future__ import annotations

import pathlib
import uuid

from prometheus_client import REGISTRY

import kubecoord
from tests.helpers import eventually
from tests.operator.conftest import NAMESPACE


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_leadership_state_and_renew_latency_are_exported(kubeconfig_path: pathlib.Path) -> None:
    service = f"metrics-{uuid.uuid4().hex[:6]}"
    renewals = _sample("kubecoord_client_renew_seconds_count", backend="kubernetes")
    options = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.2}
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path), **options) as coord:
        election = coord.leader_election(service)
        assert election.nominate("pod-a")
        leading = {"backend": "kubernetes", "service": service, "candidate": "pod-a"}
        assert _sample("kubecoord_client_is_leader", **leading) == 1.0
        eventually(lambda: _sample("kubecoord_client_renew_seconds_count", backend="kubernetes") > renewals)
        election.resign("pod-a")
        assert _sample("kubecoord_client_is_leader", **leading) == 0.0
        assert _sample("kubecoord_client_leadership_changes_total", backend="kubernetes", service=service) == 2.0
