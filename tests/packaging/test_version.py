"""``--version`` prints a module constant (importlib.metadata costs tens of milliseconds of
start-up): the constants must say what pyproject.toml says, in the source tree itself
(the installed metadata of an editable install can be stale)."""

from __future__ import annotations

import pathlib
import tomllib

import kubecoord
import kubecoord_testkit

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_version_constants_match_pyproject() -> None:
    product = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    testkit = tomllib.loads((ROOT / "testkit" / "pyproject.toml").read_text())["project"]["version"]
    assert kubecoord.__version__ == product
    assert kubecoord_testkit.__version__ == testkit
