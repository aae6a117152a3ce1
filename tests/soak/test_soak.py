"""The short soak of make test: every backend, every fault kind, zero safety violations.

One ``kubecoord-testkit soak`` run soaks the backends one after another, each with the first
round of its schedule only (every fault kind once, in the seeded order, ~50 s a backend),
and judges all their logs with one pipeline run. ``make soak`` is the long form (SOAK_SECONDS
of faults per backend: round after round). The real kube-apiserver is soaked when its
binaries are present (../shared/k8s).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import warnings

import pytest

from kubecoord_testkit.servers.kubernetes import BinariesNotFound, find_binaries
from kubecoord_testkit.soak.backends import BACKENDS
from kubecoord_testkit.soak.runner import CLOCK_OFFSET, all_kinds

pytestmark = pytest.mark.long

SECONDS_PER_BACKEND = 1
"""A schedule shorter than its first round: every backend gets every kind once, no more."""


def available_backends() -> list[str]:
    backends = ["zookeeper", "etcd", "emulator"]
    try:
        find_binaries()
    except BinariesNotFound as exc:
        warnings.warn(f"the real kube-apiserver is not soaked: {exc}", stacklevel=2)
    else:
        backends.append("kubernetes")
    return backends


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_short_soak_every_backend_every_fault_no_violation(tmp_path: pathlib.Path) -> None:
    backends = available_backends()
    out = tmp_path / "soak"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubecoord_testkit",
            "soak",
            "--backend",
            ",".join(backends),
            "--duration",
            str(SECONDS_PER_BACKEND),
            "--seed",
            "12",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1450,
    )
    print(result.stdout)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    document = json.loads((out / "soak.json").read_text())
    for name in backends:
        run = document["backends"][name]
        expected = {*all_kinds(BACKENDS[name].__new__(BACKENDS[name])), CLOCK_OFFSET}
        assert set(run["faults"]) == expected, f"{name}: not injected: {expected - set(run['faults'])}"
        assert run["fault_failures"] == [], name
        assert run["crashed_processes"] == {}, name
        assert run["restarts"] >= 2, name  # at least the killed leader and the killed member
    assert document["violations"] == {}
    figures = document["figures"]
    assert figures["lost_updates"] == 0
    assert figures["kv_operations"] > 100
    assert figures["leadership_changes"] >= 2 * len(backends)
    assert figures["rebalances"] >= 2 * len(backends)  # the members are group coordinator members
    assert (out / "report" / "report.html").exists()
    for line in ("faults injected", "leadership changes:", "failover gaps:", "lost updates: 0", "rebalances;",
                 "report:"):
        assert line in result.stdout
