"""Fixtures every test folder can use. The servers (the API emulator, ZooKeeper, the real
kube-apiserver, Spark standalone) come from the kubecoord-testkit pytest plugin; this
suite's glue over them (harnesses, clients, namespaces) lives in tests/fixtures/ as plugins."""

from __future__ import annotations

import pytest

pytest_plugins: list[str] = [
    "tests.fixtures.kubernetes_harness",
    "tests.fixtures.real_kubernetes",
    "tests.fixtures.zookeeper",
    "tests.fixtures.cassandra",
    "tests.fixtures.spark",
    "tests.fixtures.whole_cluster",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (minutes each) first: make test runs on parallel workers that
    take whole files in collection order, and a long file taken last would leave the other
    workers idle while it runs."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
