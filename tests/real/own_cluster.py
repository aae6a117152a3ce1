"""Module-scoped overrides of the session's real-server fixtures, for the install tests: a
cluster of their own (other modules create the CRDs without Helm's ownership metadata,
and the chart's cluster-scoped admission policy would start confining their
ServiceAccounts). Import both names into a test module to use them there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from kubecoord_testkit.pytest_plugin import serve_real_api
from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.fixtures import real_kubernetes


@pytest.fixture(scope="module")
def real_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealApiServer]:
    yield from serve_real_api(tmp_path_factory)


@pytest.fixture(scope="module")
def real_admin_api(real_api: RealApiServer) -> Iterator[k8s.ApiClient]:
    yield from real_kubernetes.admin_client(real_api)
