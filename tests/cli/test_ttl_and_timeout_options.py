"""What a command's --ttl and --timeout become on each backend: options that backend's
own parser accepts (a --ttl the command passes on must never be one the backend refuses)."""

from __future__ import annotations

import argparse

import pytest

from kubecoord.backends.cassandra import options as cassandra_options
from kubecoord.backends.etcd import options as etcd_options
from kubecoord.cli.connection import backend_options, resolve_url
from kubecoord.cli.holding import ttl_options


def _args(url: str, *, ttl: float | None = None, timeout: float = 5.0) -> argparse.Namespace:
    return argparse.Namespace(url=url, namespace=None, kubeconfig=None, context=None, ttl=ttl, timeout=timeout)


@pytest.mark.parametrize(("ttl", "lease"), [(1.0, 2), (2.5, 3), (3.0, 3), (30.0, 30)])
def test_etcd_ttls_are_whole_seconds_the_backend_accepts(ttl: float, lease: int) -> None:
    options = ttl_options(_args("etcd://127.0.0.1:2379", ttl=ttl))
    assert options == {"lease_duration": lease}
    assert etcd_options.parse(options).lease_duration == lease


def test_cassandra_ttls_are_whole_seconds_the_backend_accepts() -> None:
    options = ttl_options(_args("cassandra://127.0.0.1/ks", ttl=2.5))
    assert options == {"lease_duration": 3}
    cassandra_options.parse(options)


def test_etcd_takes_the_timeout_as_its_request_timeout() -> None:
    args = _args("etcd://127.0.0.1:2379", timeout=1.5)
    options = backend_options(resolve_url(args), args)
    assert options == {"request_timeout": 1.5}
    assert etcd_options.parse(options).request_timeout == 1.5
