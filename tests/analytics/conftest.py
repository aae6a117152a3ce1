"""The pipeline tests' time bound: a whole analysis takes ~1 min on a quiet machine and
several at load 10-20 (a fresh-clone run at load 10 timed one out at the suite's default
180 s), so every test here gets 420 s unless it says otherwise (or
$KUBECOORD_PIPELINE_TIMEOUT seconds, for a machine loaded past that)."""

from __future__ import annotations

import os

import pytest

PIPELINE_TIMEOUT = int(os.environ.get("KUBECOORD_PIPELINE_TIMEOUT", "420"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/analytics/" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PIPELINE_TIMEOUT))
