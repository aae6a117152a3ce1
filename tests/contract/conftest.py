"""The contract suite runs once per backend in BACKENDS.

A backend joins by adding its name here and a ``<name>_harness`` fixture (in this file
or in tests/conftest.py) that yields a contract.harness.Harness.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from .harness import Harness
from .memory_harness import MemoryHarness

BACKENDS = ["memory", "zookeeper", "cassandra", "etcd", "kubernetes", "real_kubernetes"]


@pytest.fixture
def memory_harness() -> Iterator[Harness]:
    harness = MemoryHarness()
    yield harness
    harness.close()


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest) -> Harness:
    return request.getfixturevalue(f"{request.param}_harness")  # type: ignore[no-any-return]


@pytest.fixture
def name() -> str:
    """A fresh DNS-1123 name per test, so tests sharing a server never collide."""
    return f"t-{uuid.uuid4().hex[:10]}"
