"""The chart's alerts, checked by Prometheus's own tool: ``promtool check rules`` on the
rendered PrometheusRule, and ``promtool test rules`` on tests/chart/alerts/alerts_test.yaml
(each alert fires on its scenario, not a moment early, not on a healthy twin, not on
another release's metrics). ``make test`` installs promtool (``make promtool``: the
promtool binary of Debian's prometheus package); without it this module skips."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.chart.conftest import Render, by_kind

ALERT_TESTS = Path(__file__).resolve().parent / "alerts" / "alerts_test.yaml"


def _promtool() -> str | None:
    beside = Path(sys.executable).parent / "promtool"  # where `make promtool` puts it
    return str(beside) if beside.exists() else shutil.which("promtool")


PROMTOOL = _promtool()
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed: `make promtool` installs it (Debian's prometheus package)"
)


def _rules(render: Render, *args: str) -> dict[str, object]:
    (rule,) = by_kind(render("--set", "prometheusRule.enabled=true", *args), "PrometheusRule")
    spec: dict[str, object] = rule["spec"]  # a PrometheusRule's spec is a Prometheus rule file
    return spec


def _promtool_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("values", [
    (),
    ("--set", "prometheusRule.leaderlessLeaseDurations=5", "--set", "prometheusRule.reconcileErrorsFor=30m",
     "--set", "prometheusRule.alertLabels.team=platform"),
])
def test_rendered_rules_pass_promtool_check(render: Render, tmp_path: Path, values: tuple[str, ...]) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rules(render, *values)))
    result = _promtool_run("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 5 rules found" in result.stdout


def test_alerts_fire_on_their_scenarios(render: Render, tmp_path: Path) -> None:
    # Release kc in kubecoord-system with the default thresholds, as alerts_test.yaml says.
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rules(render)))
    shutil.copy(ALERT_TESTS, tmp_path / ALERT_TESTS.name)
    result = _promtool_run("test", "rules", ALERT_TESTS.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_changed_threshold_changes_what_fires(render: Render, tmp_path: Path) -> None:
    """The unit tests see the rendered thresholds: with 20 failovers an hour allowed, the
    flapping election's alert of alerts_test.yaml no longer fires, and promtool says so."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rules(render, "--set", "prometheusRule.failoversPerHour=20")))
    shutil.copy(ALERT_TESTS, tmp_path / ALERT_TESTS.name)
    result = _promtool_run("test", "rules", ALERT_TESTS.name, cwd=tmp_path)
    assert result.returncode != 0
    assert "KubecoordFrequentFailovers" in result.stdout + result.stderr
    assert "KubecoordNoLeader" not in result.stdout + result.stderr
