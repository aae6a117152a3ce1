"""The operator's credentials follow the kubernetes backend's one rule (load_config): its
kubeconfig when it has one, else the pod's service account when the token is there,
else ~/.kube/config — for its own requests (kubeapi) and for kopf's login alike."""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

from kubecoord.operator import kubeapi
from kubecoord.operator.handlers import settings


@pytest.fixture
def fresh_client() -> Iterator[None]:
    kubeapi.reset()
    yield
    kubeapi.reset()


def _home_with_kubeconfig(tmp_path: pathlib.Path, kubeconfig_path: pathlib.Path) -> pathlib.Path:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    shutil.copy(kubeconfig_path, home / ".kube" / "config")
    return home


def _server(kubeconfig_path: pathlib.Path) -> str:
    import yaml

    config: dict[str, Any] = yaml.safe_load(kubeconfig_path.read_text())
    return str(config["clusters"][0]["cluster"]["server"])


def test_service_host_without_a_token_file_is_not_in_cluster(
    tmp_path: pathlib.Path, kubeconfig_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, fresh_client: None
) -> None:
    """KUBERNETES_SERVICE_HOST/PORT alone (a host process that inherited them, a container
    without a mounted token) is not a pod's service account: the operator falls back to
    ~/.kube/config, as the backend does, instead of failing on a token file that is not
    there."""
    assert not pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("HOME", str(_home_with_kubeconfig(tmp_path, kubeconfig_path)))
    assert kubeapi.client().configuration.host == _server(kubeconfig_path)
    assert kubeapi.call("GET", "/api/v1/namespaces/default")["metadata"]["name"] == "default"


def test_the_operators_kubeconfig_wins_for_its_requests_and_for_kopf(
    kubeconfig_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, fresh_client: None
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert kubeapi.kubeconfig() == str(kubeconfig_path)
    assert kubeapi.client().configuration.host == _server(kubeconfig_path)
    operator_settings = kopf.OperatorSettings()
    logger = kopf.LocalObjectLogger(body={}, settings=operator_settings)
    info = settings.login(logger=logger, settings=operator_settings)
    assert info is not None and info.server == _server(kubeconfig_path)
