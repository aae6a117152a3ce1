"""The client library's Prometheus metrics land in the default registry."""

from __future__ import annotations

from prometheus_client import REGISTRY

from kubecoord import metrics


def _value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_leadership_renewals_and_watch_restarts_are_recorded() -> None:
    before = _value("kubecoord_client_leadership_changes_total", backend="test", service="billing") or 0.0
    metrics.leadership("test", "billing", "pod-a", True)
    assert _value("kubecoord_client_is_leader", backend="test", service="billing", candidate="pod-a") == 1.0
    metrics.leadership("test", "billing", "pod-a", False)
    assert _value("kubecoord_client_is_leader", backend="test", service="billing", candidate="pod-a") == 0.0
    assert _value("kubecoord_client_leadership_changes_total", backend="test", service="billing") == before + 2
    count = _value("kubecoord_client_renew_seconds_count", backend="test") or 0.0
    metrics.renewed("test", 0.004)
    assert _value("kubecoord_client_renew_seconds_count", backend="test") == count + 1
    metrics.watch_restarted("test", "leases")
    assert (_value("kubecoord_client_watch_restarts_total", backend="test", resource="leases") or 0) >= 1
