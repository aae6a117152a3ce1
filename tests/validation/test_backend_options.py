"""The checks the etcd and cassandra backends share (kubecoord.validation): their URLs'
hosts and their connect() options, refused before any request with the same words."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kubecoord import validation
from kubecoord.backends.cassandra import options as cassandra_options
from kubecoord.backends.cassandra.coordinator import check_hosts as cassandra_hosts
from kubecoord.backends.etcd import options as etcd_options
from kubecoord.errors import InvalidArgumentError


def test_hosts_with_default_ports_and_ipv6() -> None:
    assert etcd_options.check_hosts("e1,e2:2380,[::1]:23") == [("e1", 2379), ("e2", 2380), ("::1", 23)]
    assert cassandra_hosts("db1,db2:9142") == [("db1", 9042), ("db2", 9142)]


@pytest.mark.parametrize("location", ["", "e1,,e2", "e1:0", "e1:65536", "e 1", "[zz]:1"])
def test_bad_hosts_name_the_scheme_and_the_form(location: str) -> None:
    for check, scheme in ((etcd_options.check_hosts, "etcd"), (cassandra_hosts, "cassandra")):
        with pytest.raises(InvalidArgumentError, match=rf"^{scheme} URL hosts .* must be HOST\[:PORT\]"):
            check(location)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"colour": "red"}, "unknown options ['colour']"),
        ({"username": "u"}, "username and password go together"),
        ({"username": 1, "password": "p"}, "username must be a str"),
        ({"lease_duration": 1}, "lease_duration must be a whole number of seconds >= 2 (a TTL), got 1"),
        ({"lease_duration": 2.5}, "lease_duration must be a whole number of seconds >= 2"),
        ({"lease_duration": True}, "lease_duration must be a whole number of seconds >= 2"),
        ({"lease_duration": float("inf")}, "lease_duration must be a whole number of seconds >= 2"),
    ],
)
def test_both_backends_refuse_bad_options_alike(options: dict[str, Any], message: str) -> None:
    for parse, backend in ((etcd_options.parse, "etcd"), (cassandra_options.parse, "cassandra")):
        with pytest.raises(InvalidArgumentError, match=re.escape(f"{backend} backend: {message}")):
            parse(options)


def test_good_options_pass() -> None:
    assert etcd_options.parse({"username": "u", "password": "p", "lease_duration": 4}).lease_duration == 4
    assert cassandra_options.parse({"username": "u", "password": "p", "lease_duration": 4.0}).lease_duration == 4
    assert validation.check_ttl(10, "x") == 10
