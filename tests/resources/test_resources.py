"""The one resource model: what the client binding and the operator both read from a spec."""

from __future__ import annotations

import base64
import pathlib
import re
from dataclasses import replace

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
from kubecoord.resources.credentials import connection_options
from kubecoord.resources.specs import Credentials


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
        BackendSpec.from_spec({"backend": "consul"}, namespace="ns")


def test_etcd_spec_gives_its_url_options_and_credentials() -> None:
    etcd = BackendSpec.from_spec({"backend": "etcd", "etcd": {"hosts": ["e1:2379", "e2"]}}, namespace="ns")
    assert (etcd.url, dict(etcd.options), etcd.credentials) == (
        "etcd://e1:2379,e2/kubecoord", {"lease_duration": 10}, None)
    spec = {"backend": "etcd", "etcd": {"hosts": ["e1"], "prefix": "", "sessionTimeoutSeconds": 4,
                                         "renewDeadlineSeconds": 2.5, "tls": True, "secretName": "etcd-auth"}}
    etcd = BackendSpec.from_spec(spec, namespace="ns")
    assert (etcd.url, dict(etcd.options)) == ("etcd://e1", {"lease_duration": 4, "renew_deadline": 2.5})
    assert etcd.credentials == Credentials(namespace="ns", secret="etcd-auth", tls=True, field="spec.etcd.secretName")
    hash(etcd)  # the operator's connection pool is keyed by it
    with pytest.raises(InvalidArgumentError, match=r"spec\.etcd\.hosts"):
        BackendSpec.from_spec({"backend": "etcd"}, namespace="ns")


def _data(**values: str) -> dict[str, str]:
    return {key.replace("_", "."): base64.b64encode(value.encode()).decode() for key, value in values.items()}


PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
SECRET = Credentials(namespace="ns", secret="auth", tls=False, field="spec.etcd.secretName")


def test_a_secret_gives_username_password_and_tls_files() -> None:
    assert connection_options(SECRET, _data(username="app", password="pw", other="x")) == {
        "username": "app", "password": "pw"}
    tls = replace(SECRET, tls=True)
    options = connection_options(tls, _data(ca_crt=PEM, tls_crt=PEM, tls_key=PEM))
    assert set(options["tls"]) == {"ca_file", "certfile", "keyfile"}
    for path in options["tls"].values():
        assert pathlib.Path(path).read_text() == PEM
        assert pathlib.Path(path).stat().st_mode & 0o077 == 0
    (ca_only,) = connection_options(tls, _data(ca_crt=PEM))["tls"].items()
    assert ca_only[0] == "ca_file" and pathlib.Path(ca_only[1]).read_text() == PEM
    assert connection_options(replace(tls, secret=None), None) == {"tls": {}}  # the system's CAs


@pytest.mark.parametrize(
    ("credentials", "data", "message"),
    [
        (SECRET, None, "Secret ns/auth (spec.etcd.secretName) does not exist"),
        (SECRET, {}, "holds none of username, password, ca.crt, tls.crt, tls.key"),
        (SECRET, _data(username="app"), "username and password together"),
        (SECRET, _data(ca_crt=PEM), "only a TLS connection uses: set tls: true"),
        (replace(SECRET, tls=True), _data(tls_crt=PEM), "tls.crt and tls.key together"),
        (replace(SECRET, tls=True), _data(ca_crt="not a pem"), "ca.crt is not PEM"),
        (SECRET, {"username": "!!", "password": "cHc="}, "username is not base64"),
        (SECRET, _data(username="", password="pw"), "username is empty"),
    ],
)
def test_an_unusable_secret_is_refused_with_what_is_wrong(
    credentials: Credentials, data: dict[str, str] | None, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        connection_options(credentials, data)
