"""Every timing's default is written once (kubecoord.timings): the CRDs default to the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubecoord import timings

CRDS = Path(__file__).parents[2] / "crds"

# (the field's parent, the field) -> the default it must have
EXPECTED = {
    (None, "leaseDurationSeconds"): timings.DEFAULT_LEASE_DURATION,
    (None, "renewDeadlineSeconds"): timings.DEFAULT_RENEW_DEADLINE,
    (None, "retryPeriodSeconds"): timings.DEFAULT_RETRY_PERIOD,
    (None, "renewIntervalSeconds"): timings.DEFAULT_RENEW_INTERVAL,
    ("zookeeper", "sessionTimeoutSeconds"): timings.DEFAULT_SESSION_LEASE,
    ("cassandra", "sessionTimeoutSeconds"): timings.DEFAULT_SESSION_LEASE,
    ("etcd", "sessionTimeoutSeconds"): timings.DEFAULT_SESSION_LEASE,
    ("assignment", "sessionTimeoutSeconds"): timings.DEFAULT_GROUP_SESSION_TIMEOUT,
    ("assignment", "rebalanceTimeoutSeconds"): timings.DEFAULT_REBALANCE_TIMEOUT,
}


def _defaults(schema: dict[str, Any], parent: str | None) -> Iterator[tuple[str | None, str, Any]]:
    for name, prop in (schema.get("properties") or {}).items():
        if name.endswith("Seconds") and "default" in prop:
            yield parent, name, prop["default"]
        yield from _defaults(prop, name)


def _timing_defaults() -> list[tuple[str, str | None, str, Any]]:
    found = []
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            found += [(path.name, parent, name, value) for parent, name, value in _defaults(spec, None)]
    return found


def test_the_crds_declare_timing_defaults() -> None:
    assert len(_timing_defaults()) >= len(EXPECTED)


@pytest.mark.parametrize(("crd", "parent", "field", "default"), _timing_defaults())
def test_a_crd_timing_default_is_kubecoord_timings(crd: str, parent: str | None, field: str, default: Any) -> None:
    key = (parent, field) if (parent, field) in EXPECTED else (None, field)
    assert key in EXPECTED, f"{crd}: {parent}.{field} defaults to {default}, which kubecoord.timings does not name"
    assert default == EXPECTED[key], f"{crd}: {parent}.{field}"


def test_the_backends_default_to_kubecoord_timings() -> None:
    from kubecoord.backends.cassandra.options import Options as CassandraOptions
    from kubecoord.backends.zookeeper.options import parse as zookeeper_options
    from kubecoord.resources import BackendSpec, member_timings

    assert zookeeper_options({}).session_timeout == timings.DEFAULT_SESSION_LEASE
    assert CassandraOptions().lease_duration == timings.DEFAULT_SESSION_LEASE
    assert timings.Timings().lease_duration == timings.DEFAULT_LEASE_DURATION
    assert member_timings({}) == (timings.DEFAULT_LEASE_DURATION, timings.DEFAULT_RENEW_INTERVAL)
    zookeeper = BackendSpec.from_spec({"backend": "zookeeper", "zookeeper": {"hosts": ["zk:2181"]}}, namespace="ns")
    assert dict(zookeeper.options)["lease_duration"] == timings.DEFAULT_SESSION_LEASE
