"""The operator's HA storm, short form (kubecoord_testkit.storm; the long form is
``make storm``): two replicas as the chart installs them, on a whole cluster of the
storm's own, under creates, ``spec.clients`` updates and deletes of all three kinds, with
kill -9 of the active replica, SIGSTOP past its lease, its API connection held past its
lease, a freeze between its fencing check and a write's send, a write replayed exactly as
the killed replica would send it after its successor's first write, and a kube-apiserver
restart. The judge is the API server's audit log: every operator write compared with who
held the operator Lease when the server received it.

Fail-first: the same judge on a storm with fencing off (the chart with
``rbac.fenceOperatorWrites=false``) finds a deposed replica's write applied after its
successor's first — what the fenced storm's API server refuses (403). The freeze between
check and send produces one only sometimes (the resumed replica often cancels its frozen
request before the server has applied it: 1 in 5 freezes in one run, 1 in 2 in another),
so the run then replays one such write, which certainly arrives; it ends at the first
violation.
"""

from __future__ import annotations

import pathlib

import pytest

from kubecoord_testkit.servers.kubernetes import CLUSTER_COMPONENTS, BinariesNotFound, find_binaries
from kubecoord_testkit.storm.runner import StormOptions, run
from tests.chart import conftest as chart_fixtures

pytestmark = [pytest.mark.slow, pytest.mark.long]

helm = chart_fixtures.helm


@pytest.fixture(scope="module", autouse=True)
def _binaries() -> None:
    try:
        binaries = find_binaries()
    except BinariesNotFound as error:
        pytest.skip(f"no real kube-apiserver binaries: {error}")
    if any(binaries.component(name) is None for name in CLUSTER_COMPONENTS):
        pytest.skip(f"no cluster components ({', '.join(CLUSTER_COMPONENTS)}) beside {binaries.apiserver}")


@pytest.mark.timeout(1200)
def test_the_fenced_storm_applies_no_write_of_a_deposed_replica_and_converges(
    helm: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    faults = ("kill", "freeze", "hold", "send-freeze", "replay", "restart")
    report = run(StormOptions(seconds=45, seed=11, faults=faults, fault_every=5, min_faults=len(faults), helm=helm),
                 tmp_path)
    print(report.render())
    assert all(report.faults[kind] >= 1 for kind in faults), report.faults
    assert report.verdict.takeovers >= len(faults)
    assert report.verdict.checked > 0
    assert not report.verdict.violations, "a deposed replica's write was applied after its successor's first"
    assert not report.verdict.term_mismatches
    assert not report.verdict.unattributable and not report.verdict.unrecorded_lease_writes, \
        "the audit log does not say who held the operator Lease at every write"
    assert not report.problems, "the end state did not converge"
    assert report.ok
    replayed = [note for note in report.notes if note.startswith("replayed write")]
    assert replayed, report.notes
    assert all(": 403 Forbidden: " in note and "a write of operator term" in note for note in replayed), replayed


@pytest.mark.timeout(1200)
def test_unfenced_the_judge_finds_a_deposed_replicas_write_applied_after_the_takeover(
    helm: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    report = run(StormOptions(seconds=0, seed=12, faults=("send-freeze", "replay"), fault_every=3, fenced=False,
                              min_faults=2, until_violation=True, helm=helm), tmp_path)
    print(report.render())
    assert report.verdict.violations, "no deposed write applied: the judge would miss what fencing prevents"
    assert all(w.applied and not w.term for w in report.verdict.violations)
    assert not report.ok
