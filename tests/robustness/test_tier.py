"""The robustness tier's short form (make test): every backend's clients under every fault
kind it can suffer, each history judged by Porcupine (kubecoord-porcupine). A violation
fails the test with Porcupine's smallest failing window; the run's folder keeps the
history and the visualisations. Then kubecoord analyze judges every history again, as a
coordination event log, with a copy of each with a lost update, two overlapping holders
and a token going back injected (handmade.inject) and a hand-made history of injected
violations: on each, its KV and lock verdicts must agree with Porcupine's, by the rules of
robustness.eventlog, and both must flag every injection.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import pytest

from kubecoord_testkit.robustness import eventlog
from kubecoord_testkit.robustness.backends import BACKENDS
from kubecoord_testkit.robustness.checker import check_history, find_checker, missing_reason
from kubecoord_testkit.robustness.handmade import Injected, hold, inject, kv
from kubecoord_testkit.robustness.runner import Plan, run

pytestmark = [
    pytest.mark.long,
    pytest.mark.slow,
    pytest.mark.skipif(find_checker() is None, reason=f"robustness tier: {missing_reason()}"),
]

SEED = int(os.environ.get("KUBECOORD_TIER_SEED", "1"))
"""The fault schedule's and the traffic's seed (the environment's KUBECOORD_TIER_SEED, default 1)."""

PLANS = {
    "memory": Plan("memory", duration=8, fault_every=1.5, seed=SEED),
    "zookeeper": Plan("zookeeper", duration=25, fault_every=2.0, seed=SEED),
    "emulator": Plan("emulator", duration=20, fault_every=2.0, seed=SEED),
    "kubernetes": Plan("kubernetes", duration=20, fault_every=2.0, seed=SEED),
    "kubernetes-cluster": Plan("kubernetes-cluster", duration=15, fault_every=2.0, seed=SEED),
    "cassandra": Plan("cassandra", duration=20, fault_every=2.0, seed=SEED),
    "etcd": Plan("etcd", duration=20, fault_every=2.0, seed=SEED),
}


def _skip_without_servers(backend: str) -> None:
    if backend == "zookeeper":
        from kubecoord_testkit.servers.zookeeper import classpath

        try:
            classpath()
        except FileNotFoundError as exc:
            pytest.skip(f"robustness tier on ZooKeeper: {exc}")
    if backend.startswith("kubernetes"):
        from kubecoord_testkit.servers.kubernetes import CLUSTER_COMPONENTS, BinariesNotFound, find_binaries

        try:
            binaries = find_binaries()
        except BinariesNotFound as exc:
            pytest.skip(f"robustness tier on the real kube-apiserver: {exc}")
        missing = [name for name in CLUSTER_COMPONENTS if binaries.component(name) is None]
        if backend == "kubernetes-cluster" and missing:
            pytest.skip(f"robustness tier on the whole cluster: no {', '.join(missing)} beside {binaries.apiserver}")
    if backend == "cassandra":
        from kubecoord_testkit.servers.cassandra import jars_missing

        reason = jars_missing()
        if reason is not None:
            pytest.skip(f"robustness tier on Cassandra: {reason}")


def _run_and_judge(
    backend: str, tmp_path: pathlib.Path, recorded: dict[str, tuple[pathlib.Path, list[dict[str, Any]]]],
) -> None:
    _skip_without_servers(backend)
    plan = PLANS[backend]
    result = run(plan, tmp_path / backend)
    print(result.summary())
    recorded[backend] = (result.folder, result.verdict.violations)
    assert result.verdict.status in (0, 1), f"the checker failed: {result.verdict.stderr}"
    assert result.ok, f"{result.summary()}\n{result.verdict.stderr}"
    figures = result.figures
    assert set(figures["fault_kinds"]) == set(plan.faults or BACKENDS[backend].faults), "every kind injected"
    # Traffic ran (a loaded machine is slow), holders' fenced writes too.
    assert figures["kv_operations"] >= 100 and figures["holds"] >= 5 and figures["fenced_writes"] >= 5, figures
    assert not figures["client_crashes"], "a client ended with an error (see the run's stderr/)"


@pytest.fixture(scope="module")
def recorded() -> dict[str, tuple[pathlib.Path, list[dict[str, Any]]]]:
    """Per backend run by this module: its run's folder and Porcupine's violations."""
    return {}


def injected_history() -> dict[str, Any]:
    """A hand-made history with one of each violation both judges check, beside correct twins:
    a lost update (k-lost), a create race (k-race), a version going back (k-back), two
    overlapping holders (inj-overlap), a token going back (inj-back); k-ok, inj-clean and
    the semaphore inj-sem (two slots held at once) are correct."""
    kv_ops = [
        kv(0, 1.0, 1.1, "put", "k-lost", value="a", version=1),
        kv(1, 1.2, 1.3, "update", "k-lost", value="b", expected=1, version=2),
        kv(2, 1.25, 1.35, "update", "k-lost", value="c", expected=1, version=2),
        kv(0, 2.0, 2.1, "put", "k-ok", value="a", version=1),
        kv(1, 2.2, 2.3, "update", "k-ok", value="b", expected=1, version=2),
        kv(2, 2.4, 2.5, "delete", "k-ok", expected=2),
        kv(0, 2.6, 2.7, "put", "k-ok", value="c", version=1),
        kv(0, 3.0, 3.1, "put", "k-race", value="a", version=1),
        kv(1, 3.2, 3.3, "put", "k-race", value="b", version=1),
        kv(0, 4.0, 4.1, "put", "k-back", value="a", version=1),
        kv(1, 4.2, 4.3, "update", "k-back", value="b", version=3),
        kv(2, 4.4, 4.5, "update", "k-back", value="c", version=2),
    ]
    lock_ops = [
        *hold(3, "a", (1.0, 1.1), (1.6, 1.7), token=1, lock="inj-overlap"),
        *hold(4, "b", (1.2, 1.3), (1.8, 1.9), token=2, lock="inj-overlap"),
        *hold(3, "a", (2.0, 2.1), (2.2, 2.3), token=5, lock="inj-back"),
        *hold(4, "b", (2.5, 2.6), (2.7, 2.8), token=4, lock="inj-back"),
        *hold(3, "a", (3.0, 3.1), (3.2, 3.3), token=1, lock="inj-clean"),
        *hold(4, "b", (3.4, 3.5), (3.6, None), token=2, lock="inj-clean"),
        *hold(3, "a", (4.0, 4.1), (4.6, 4.7), token=1, lock="inj-sem", slots=2, slot=0),
        *hold(4, "b", (4.2, 4.3), (4.8, 4.9), token=1, lock="inj-sem", slots=2, slot=1),
    ]
    return {"kv": kv_ops, "locks": lock_ops, "faults": []}


@pytest.mark.timeout(600)  # a Cassandra node starting, then killed and started again, on a loaded machine
@pytest.mark.parametrize("backend", list(PLANS))
def test_every_history_is_linearizable_under_faults(
    backend: str, tmp_path: pathlib.Path, recorded: dict[str, tuple[pathlib.Path, list[dict[str, Any]]]],
) -> None:
    _run_and_judge(backend, tmp_path, recorded)


INJECTED = "injected"
"""The hand-made history's name, and the suffix of a recorded history's injected copy."""


@pytest.fixture(scope="module")
def injections(recorded: dict[str, tuple[pathlib.Path, list[dict[str, Any]]]]) -> dict[str, Injected]:
    """Per recorded history, a copy with violations injected (handmade.inject): the copy's
    name -> the injection."""
    return {f"{backend}-{INJECTED}": inject(json.loads((run / "history.json").read_text()))
            for backend, (run, _) in recorded.items()}


@pytest.fixture(scope="module")
def agreements(
    spark: Any, tmp_path_factory: pytest.TempPathFactory,
    recorded: dict[str, tuple[pathlib.Path, list[dict[str, Any]]]], injections: dict[str, Injected],
) -> dict[str, eventlog.Agreement]:
    """kubecoord analyze's verdicts beside Porcupine's, on the whole history and on the log's
    view of it, for each history this module recorded, its injected copy and the hand-made
    history, as event logs (robustness.eventlog): one analysis for all."""
    from kubecoord.analytics.pipeline import analyze

    histories = {backend: json.loads((run / "history.json").read_text()) for backend, (run, _) in recorded.items()}
    histories.update({name: injected.history for name, injected in injections.items()})
    histories[INJECTED] = injected_history()
    judged = {}
    for name, history in histories.items():
        folder = tmp_path_factory.mktemp(name)
        whole = recorded[name][1] if name in recorded else check_history(history, folder, timeout=60).violations
        view = check_history(eventlog.log_view(history), folder / "log-view", timeout=60)
        assert view.status in (0, 1), view.stderr
        eventlog.write(history, folder / "events", name)
        judged[name] = (folder, history, whole, view.violations)
    # The clients of a run share one monotonic clock: no skew to tolerate.
    analysis = analyze(spark, [str(folder / "events" / "*.jsonl") for folder, *_ in judged.values()], skew=0.0)
    try:
        rows = [row.asDict() for row in analysis.tables["violations"].collect()]
    finally:
        analysis.close()
    found = {name: eventlog.compare(name, history, whole, rows, log_view=view)
             for name, (_, history, whole, view) in judged.items()}
    print("\n".join(a.describe() for a in found.values()))
    return found


@pytest.mark.timeout(900)  # one analysis: ~1 min on a quiet machine, 7+ at load 12 on 2 cores
def test_the_pipeline_finds_the_injected_violations_porcupine_finds(agreements: dict[str, eventlog.Agreement]) -> None:
    injected = agreements[INJECTED]
    assert (injected.porcupine_keys, injected.porcupine_locks) == ({"k-lost", "k-race", "k-back"},
                                                                   {"inj-overlap", "inj-back"}), injected.describe()
    assert (injected.pipeline_keys, injected.pipeline_locks) == (injected.porcupine_keys, injected.porcupine_locks)
    assert injected.agrees, injected.describe()


@pytest.mark.timeout(900)
def test_both_judges_find_the_violations_injected_into_every_recorded_history(
    agreements: dict[str, eventlog.Agreement], injections: dict[str, Injected],
) -> None:
    if not injections:
        pytest.skip("no backend's history was recorded in this run (each was deselected or skipped)")
    for name, injected in injections.items():
        agreement = agreements[name]
        locks = {injected.overlap, injected.token_back}
        # The recorded history is linearizable (its own test): the injections are all Porcupine finds.
        assert (agreement.porcupine_keys, agreement.porcupine_locks) == ({injected.lost_update}, locks), \
            agreement.describe()
        assert injected.lost_update in agreement.pipeline_keys and agreement.pipeline_locks == locks, \
            agreement.describe()


@pytest.mark.timeout(900)
def test_the_pipelines_lock_verdicts_equal_porcupines_on_every_recorded_history(
    agreements: dict[str, eventlog.Agreement],
) -> None:
    if len(agreements) == 1:
        pytest.skip("no backend's history was recorded in this run (each was deselected or skipped)")
    for agreement in agreements.values():
        assert agreement.pipeline_locks == agreement.porcupine_locks, agreement.describe()


@pytest.mark.timeout(900)
def test_the_pipelines_kv_verdicts_agree_with_porcupines_both_ways_on_every_recorded_history(
    agreements: dict[str, eventlog.Agreement],
) -> None:
    if len(agreements) == 1:
        pytest.skip("no backend's history was recorded in this run (each was deselected or skipped)")
    for agreement in agreements.values():
        assert agreement.agrees, agreement.describe()
