"""The command on a real Spark standalone cluster (a master and two workers on 127.0.0.1)
gives the same tables and summary as the frozen local verdicts (golden/injected.json, the
history test_command analyses in local mode); the executors write the tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubecoord.analytics.session import FAST_START_JVM_OPTIONS, QUIET_JVM_OPTIONS
from kubecoord.wire.events import VIOLATION_TYPES
from kubecoord_testkit.history_generator import Spec, generate

from . import golden

SETTINGS = {
    "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m", "spark.cores.max": "2", "spark.driver.memory": "512m",
    # A small history: the settings of the local test session (TESTING-NOTES.md), so the
    # run is a few dozen jobs of two tasks and the JVMs start fast; what the test checks
    # (executors on other JVMs write the tables, same results) does not depend on them.
    "spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
    "spark.driver.extraJavaOptions": f"{QUIET_JVM_OPTIONS} {FAST_START_JVM_OPTIONS}",
    "spark.executor.extraJavaOptions": f"{QUIET_JVM_OPTIONS} {FAST_START_JVM_OPTIONS}",
}
CLUSTER_CONF = [item for key, value in SETTINGS.items() for item in ("--conf", f"{key}={value}")]

pytestmark = pytest.mark.long


@pytest.mark.timeout(900)  # a Spark driver and a cluster: ~1 min on a quiet machine, minutes at load 20
def test_a_standalone_cluster_gives_the_frozen_local_verdicts(
    spark: Any, spark_standalone: Any, tmp_path: Path
) -> None:
    # The history and its golden copy are test_command's (local mode, compared there too).
    manifest = generate(tmp_path / "logs", Spec(elections=3, groups=2, stores=2, hours=1.5, gzip=True, malformed=4,
                                                inject={kind: 1 for kind in VIOLATION_TYPES}))
    cluster_out = tmp_path / "cluster"

    command = [sys.executable, "-m", "kubecoord.analytics", str(tmp_path / "logs"),
               "--out", cluster_out.as_uri(), "--master", spark_standalone.url, "--quiet", *CLUSTER_CONF]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    finished = subprocess.run(command, capture_output=True, text=True, timeout=780, env=env)

    assert finished.returncode == 3, finished.stderr[-3000:]
    assert json.loads((cluster_out / "summary.json").read_text())["violations"] == manifest.injected
    golden.check("injected", golden.snapshot_output(spark, cluster_out, tmp_path / "logs"))
    status = spark_standalone.status()
    assert status is not None and status["aliveworkers"] == 2
    completed = status["completedapps"]
    assert len(completed) >= 1 and completed[-1]["name"] == "kubecoord-analyze"
