"""Client metrics exist on every backend: the core's handle scaffolding and the lease core
report leadership for memory:// like kubernetes:// (zookeeper: tests/backends/zookeeper)."""

from __future__ import annotations

from prometheus_client import REGISTRY

import kubecoord
from kubecoord.testing import ManualClock


def _is_leader(backend: str, service: str, candidate: str) -> float | None:
    return REGISTRY.get_sample_value(
        "kubecoord_client_is_leader", {"backend": backend, "service": service, "candidate": candidate}
    )


def test_memory_elections_export_leadership_and_renewals() -> None:
    clock = ManualClock()
    renewals = REGISTRY.get_sample_value("kubecoord_client_renew_seconds_count", {"backend": "memory"}) or 0.0
    with kubecoord.connect("memory://metrics-memory", clock=clock, lease_duration=5) as coord:
        election = coord.leader_election("metrics-svc")
        assert election.nominate("pod-a")
        assert _is_leader("memory", "metrics-svc", "pod-a") == 1.0
        clock.advance(2)  # one renewal (every 0.4 x lease_duration)
        assert REGISTRY.get_sample_value("kubecoord_client_renew_seconds_count", {"backend": "memory"}) == renewals + 1
        election.resign("pod-a")
        assert _is_leader("memory", "metrics-svc", "pod-a") == 0.0
