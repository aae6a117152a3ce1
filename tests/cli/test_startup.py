"""The command answers --help and --version without importing any subcommand's module
(no backend client, no kopf, no JVM): fast, and working in an installation without the
optional extras."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

PROBE = """
import sys
from kubecoord.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {{'kubernetes', 'kopf', 'kazoo', 'pyspark', 'yaml',
        'prometheus_client', 'kubecoord_testkit'}} or m.startswith(('kubecoord.cli.', 'kubecoord.backends',
        'kubecoord.operator', 'kubecoord.analytics')))
print('HEAVY', heavy)
"""


@pytest.mark.parametrize("argv", [["--help"], ["--version"], []])
def test_top_level_help_and_version_import_no_subcommand(argv: list[str]) -> None:
    result = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                            check=True)
    heavy = result.stdout.strip().splitlines()[-1]
    # kubecoord.cli.exits is the shared error table, imported by the command itself.
    assert heavy in ("HEAVY []", "HEAVY ['kubecoord.cli.exits']"), heavy


def test_version_is_the_installed_distributions() -> None:
    result = subprocess.run([sys.executable, "-m", "kubecoord.cli", "--version"], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == f"kubecoord {version('kubecoord')}"
    testkit = subprocess.run([sys.executable, "-m", "kubecoord_testkit", "--version"], capture_output=True,
                             text=True, check=True)
    assert testkit.stdout.strip() == f"kubecoord-testkit {version('kubecoord-testkit')}"
