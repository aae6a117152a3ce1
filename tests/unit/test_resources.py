"""The one resource model: what the client binding and the operator both read from a spec."""

from __future__ import annotations

import pytest

from kubecoord import InvalidArgumentError
from kubecoord._core.lease import Timings
from kubecoord.resources import (
    BackendSpec,
    election_timing_overrides,
    human_bytes,
    member_timings,
    parse_quantity,
    size_limit_bytes,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", 1), ("512Ki", 512 * 1024), ("1Mi", 1024**2), ("2Gi", 2 * 1024**3), ("0", None), ("1.5Mi", None),
     ("1M", None), ("", None), (None, None)],
)
def test_one_quantity_parser(text: object, expected: int | None) -> None:
    assert parse_quantity(text) == expected


def test_size_limit_defaults_to_the_crd_default_and_refuses_what_is_not_a_quantity() -> None:
    assert size_limit_bytes({}) == 1024**2
    assert size_limit_bytes({"sizeLimit": "64Ki"}) == 64 * 1024
    with pytest.raises(InvalidArgumentError, match="sizeLimit"):
        size_limit_bytes({"sizeLimit": "lots"})
    assert human_bytes(1536) == "1.5Ki"


def test_member_timings_fall_back_to_the_crd_defaults_only() -> None:
    assert member_timings({}) == (15.0, 5.0)
    assert member_timings({"leaseDurationSeconds": 4, "renewIntervalSeconds": 1}) == (4.0, 1.0)


def test_election_timings_override_only_what_the_spec_says() -> None:
    overrides = election_timing_overrides({"leaseDurationSeconds": 20})
    assert overrides == {"lease_duration": 20.0, "renew_deadline": None, "retry_period": None}
    assert Timings().with_overrides(**overrides) == Timings(20, 10, 2)


def test_backend_spec_gives_connect_arguments() -> None:
    assert BackendSpec.from_spec({}, namespace="ns").url == "kubernetes://ns"
    zk = BackendSpec.from_spec(
        {"backend": "zookeeper", "zookeeper": {"hosts": ["zk1:2181", "zk2:2181"], "sessionTimeoutSeconds": 4}},
        namespace="ns",
    )
    assert (zk.url, dict(zk.options)) == ("zookeeper://zk1:2181,zk2:2181/kubecoord", {"lease_duration": 4.0})
    with pytest.raises(InvalidArgumentError, match="hosts"):
        BackendSpec.from_spec({"backend": "zookeeper"}, namespace="ns")
    with pytest.raises(InvalidArgumentError, match="unsupported"):
        BackendSpec.from_spec({"backend": "etcd"}, namespace="ns")
