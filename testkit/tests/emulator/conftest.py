"""Clients of the session's API emulator, through the official kubernetes client."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes.client import ApiClient


@pytest.fixture(scope="session")
def api_client(kubeconfig_path: pathlib.Path) -> Iterator[ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig_path))
    yield client
    client.close()


@pytest.fixture
def core(api_client: ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture
def leases(api_client: ApiClient) -> kubernetes.client.CoordinationV1Api:
    return kubernetes.client.CoordinationV1Api(api_client)


@pytest.fixture
def custom(api_client: ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(core: kubernetes.client.CoreV1Api) -> str:
    """A fresh namespace per test, so tests never see each other's objects."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name}})
    return name
