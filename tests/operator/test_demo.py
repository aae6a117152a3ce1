"""``make demo`` end to end: the embedded demo as a user runs it, in a process of its own."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest


@pytest.mark.timeout(540)  # the demo gives each process 180 s to come up (a loaded machine), its steps 30 s each
def test_make_demo_shows_failover_group_change_and_kv_listeners_then_cleans_up(kubectl: pathlib.Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}  # the embedded emulator
    result = subprocess.run(
        [sys.executable, "-m", "kubecoord_testkit", "demo"], env=env, capture_output=True, text=True, timeout=480
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "Kubernetes API: the embedded API emulator at http://127.0.0.1:" in out.splitlines()[0]
    assert "5 workers up in" in out
    # The real kubectl's tables: READY is the Ready condition's status, as on a cluster.
    assert re.search(r"^NAME +LEADER +EPOCH +READY +AGE$", out, re.MULTILINE), out[-3000:]
    assert re.search(r"^billing +pod-\w +2 +True +\d+s$", out, re.MULTILINE), out[-3000:]
    assert "<none>" not in out
    assert "NAME      LEADER   EPOCH" in out and "MEMBERS   GENERATION" in out and "KEYS   SIZE" in out
    assert "failover:" in out and "leads with epoch 2" in out
    assert "workers   1         3" in out  # w2 left: one member, generation 3 (w1, w2 joined; w2 left)
    assert "listener: topics/orders = 'partitions=6'" in out
    assert "MemberLeft: w2 left" in out
    assert "stopped every process and deleted every resource" in out


@pytest.mark.timeout(300)
def test_a_failed_demo_keeps_and_shows_the_operators_log(kubectl: pathlib.Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    result = subprocess.run([sys.executable, "-m", "kubecoord_testkit", "demo", "--namespace", "no-such-namespace"],
                            env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode != 0
    kept = re.search(r"the operator's log is kept in (\S+);", result.stderr)
    assert kept, result.stderr[-3000:]
    log = pathlib.Path(kept.group(1))
    assert "namespace 'no-such-namespace' does not exist" in log.read_text()
    assert "namespace 'no-such-namespace' does not exist" in result.stderr  # its end, printed
    log.unlink()
    log.parent.rmdir()
