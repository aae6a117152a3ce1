"""The pipeline tests' time bound: a whole analysis takes ~1 min on a quiet machine and
several at load 10-20 (a fresh-clone run at load 10 timed one out at the suite's default
180 s), so every test here gets 420 s unless it says otherwise (or
$KUBECOORD_PIPELINE_TIMEOUT seconds, for a machine loaded past that). Also the session's
combined analyses of the modules' parts (tests/analytics/combined.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.analytics.combined import CombinedAnalyses

PIPELINE_TIMEOUT = int(os.environ.get("KUBECOORD_PIPELINE_TIMEOUT", "420"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/analytics/" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PIPELINE_TIMEOUT))


@pytest.fixture(scope="session")
def combined_analyses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CombinedAnalyses]:
    """The analyses of the modules' parts (tests/analytics/combined.py), closed at the end."""
    analyses = CombinedAnalyses(tmp_path_factory.mktemp("combined"))
    yield analyses
    analyses.close()
