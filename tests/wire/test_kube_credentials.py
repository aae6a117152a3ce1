"""The one rule for which Kubernetes credentials a process uses (wire.kube_credentials)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubecoord.wire.kube_credentials import kubeconfig_to_read


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A service-account folder with its token, and the pod's environment."""
    (tmp_path / "token").write_text("t")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", "/elsewhere/config")
    return tmp_path


def test_an_explicit_kubeconfig_wins_even_in_a_pod(pod: Path) -> None:
    assert kubeconfig_to_read("/given/config", pod) == "/given/config"


def test_a_pod_uses_its_service_account_over_kubeconfig_env(pod: Path) -> None:
    assert kubeconfig_to_read(None, pod) is None


def test_without_the_token_file_it_is_no_pod(pod: Path) -> None:
    (pod / "token").unlink()
    assert kubeconfig_to_read(None, pod) == "/elsewhere/config"


def test_outside_a_pod_the_first_kubeconfig_path_else_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", f"/a/config{os.pathsep}/b/config")
    assert kubeconfig_to_read(None, tmp_path) == "/a/config"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfig_to_read(None, tmp_path) == str(tmp_path / ".kube" / "config")
