"""Fixtures every test folder can use, the product's (tests/) and the testkit's own
(testkit/tests/). The servers (the API emulator, ZooKeeper, the real kube-apiserver, Spark
standalone) come from the kubecoord-testkit pytest plugin; this suite's glue over them
(harnesses, clients, namespaces) lives in tests/fixtures/ as plugins."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins: list[str] = [
    "tests.fixtures.kubernetes_harness",
    "tests.fixtures.real_kubernetes",
    "tests.fixtures.zookeeper",
    "tests.fixtures.cassandra",
    "tests.fixtures.etcd",
    "tests.fixtures.spark",
    "tests.fixtures.whole_cluster",
]


settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, max_examples=40, stateful_step_count=30, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
"""The state machines' profile in make test: the same examples on every run (derandomized,
no example database), a few seconds per machine."""
settings.register_profile(
    "thorough", max_examples=10_000, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
"""The long form: ``pytest --hypothesis-profile=thorough`` (or KUBECOORD_HYPOTHESIS=thorough)."""
settings.load_profile(os.environ.get("KUBECOORD_HYPOTHESIS", "ci"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (minutes each) first: make test runs on parallel workers that
    take whole files in collection order, and a long file taken last would leave the other
    workers idle while it runs."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


START_BUDGETS: dict[str, float] = {
    "cassandra_server": 240.0,  # a JVM node: ~1 min idle, past 180 s at load 16+ (its own wait: 180 s)
    "cassandra_cluster": 720.0,  # three nodes one after the other (180 s each), then gossip (180 s)
    "real_api": 240.0,  # kube-apiserver, controller-manager, scheduler, hollow nodes (90 s each at most)
    "spark_standalone": 480.0,  # a master and two workers (240 s each at most)
    "spark": 240.0,  # the shared local session: ~4 s idle, past 180 s at load 20+
}
"""Seconds added to the per-test timeout of a test that will start one of these servers.
pytest-timeout counts fixture set-up against the first test that uses a fixture, and the
start-up of a shared server on a loaded machine is not that test's time; each server's own
start-up still fails by its own deadline (a server that never comes up)."""


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Before pytest-timeout arms its timer (this wrapper runs outside it): a test whose
    fixtures include a server of START_BUDGETS that is not set up yet in this process gets
    that server's start budget added to its timeout."""
    extra = sum(budget for name, budget in START_BUDGETS.items() if _starts(item, name))
    base = _timeout(item)
    if extra and base > 0:
        item.add_marker(pytest.mark.timeout(base + extra), append=False)
    yield


def _starts(item: pytest.Item, fixture: str) -> bool:
    """Whether running ``item`` sets ``fixture`` up (used, and not cached in this process)."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.get(fixture) if info is not None else None
    if not definitions:
        return False
    return definitions[-1].cached_result is None


def _timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    if marker is not None and "timeout" in marker.kwargs:
        return float(marker.kwargs["timeout"])
    option = item.config.getoption("timeout", None)
    return float(option if option is not None else item.config.getini("timeout") or 0)


@pytest.fixture(autouse=True)
def _root_log_handlers_as_they_were() -> Iterator[None]:
    """In-process command runs (kubecoord.cli.logs.configure) and kopf's runner bind root
    log handlers to the stderr of their moment — a test's captured stream, click's runner
    buffer — which is closed once the test ends; left in place, any later record of any
    thread writes to a closed stream (``--- Logging error ---`` in the next kopf run's
    output, or at exit). Drop the handlers a test added (pytest's own capture handlers
    excepted, which pytest removes itself) and put the root level back."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    root.handlers[:] = [h for h in root.handlers if h in before or type(h).__module__ == "_pytest.logging"]
    root.setLevel(level)
