"""The robustness tier's short form (make test): every backend's clients under every fault
kind it can suffer, each history judged by Porcupine (kubecoord-porcupine). A violation
fails the test with Porcupine's smallest failing window; the run's folder keeps the
history and the visualisations.
"""

from __future__ import annotations

import pathlib

import pytest

from kubecoord_testkit.robustness.backends import BACKENDS
from kubecoord_testkit.robustness.checker import find_checker, missing_reason
from kubecoord_testkit.robustness.runner import Plan, run

pytestmark = [
    pytest.mark.long,
    pytest.mark.slow,
    pytest.mark.skipif(find_checker() is None, reason=f"robustness tier: {missing_reason()}"),
]

PLANS = {
    "memory": Plan("memory", duration=8, fault_every=1.5),
    "zookeeper": Plan("zookeeper", duration=25, fault_every=2.0),
    "emulator": Plan("emulator", duration=20, fault_every=2.0),
    "kubernetes": Plan("kubernetes", duration=20, fault_every=2.0),
    "cassandra": Plan("cassandra", duration=20, fault_every=2.0),
    "etcd": Plan("etcd", duration=20, fault_every=2.0),
}


def _skip_without_servers(backend: str) -> None:
    if backend == "zookeeper":
        from kubecoord_testkit.servers.zookeeper import classpath

        try:
            classpath()
        except FileNotFoundError as exc:
            pytest.skip(f"robustness tier on ZooKeeper: {exc}")
    if backend == "kubernetes":
        from kubecoord_testkit.servers.kubernetes import BinariesNotFound, find_binaries

        try:
            find_binaries()
        except BinariesNotFound as exc:
            pytest.skip(f"robustness tier on the real kube-apiserver: {exc}")
    if backend == "cassandra":
        from kubecoord_testkit.servers.cassandra import jars_missing

        reason = jars_missing()
        if reason is not None:
            pytest.skip(f"robustness tier on Cassandra: {reason}")


@pytest.mark.timeout(600)  # a Cassandra node starting, then killed and started again, on a loaded machine
@pytest.mark.parametrize("backend", list(PLANS))
def test_every_history_is_linearizable_under_faults(backend: str, tmp_path: pathlib.Path) -> None:
    _skip_without_servers(backend)
    plan = PLANS[backend]
    result = run(plan, tmp_path / backend)
    print(result.summary())
    assert result.verdict.status in (0, 1), f"the checker failed: {result.verdict.stderr}"
    assert result.ok, f"{result.summary()}\n{result.verdict.stderr}"
    figures = result.figures
    assert set(figures["fault_kinds"]) == set(plan.faults or BACKENDS[backend].faults), "every kind injected"
    # Traffic ran (a loaded machine is slow), holders' fenced writes too.
    assert figures["kv_operations"] >= 100 and figures["holds"] >= 5 and figures["fenced_writes"] >= 5, figures
    assert not figures["client_crashes"], "a client ended with an error (see the run's stderr/)"
