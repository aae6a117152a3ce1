"""The kubecoord and kubecoord-testkit commands and the analytics command modules start no
JVM on import."""

from __future__ import annotations

import subprocess
import sys


def test_cli_imports_neither_pyspark_nor_matplotlib() -> None:
    code = (
        "import sys, kubecoord.cli as c, kubecoord_testkit.cli as t\n"
        "import argparse\n"
        "for name, (module, _) in [*c.SUBCOMMANDS.items(), *t.SUBCOMMANDS.items()]:\n"
        "    __import__(module)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'matplotlib', 'py4j'))\n"
        "print(bad)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"
    assert "analyze" in subprocess.run(
        [sys.executable, "-m", "kubecoord.cli", "--help"], capture_output=True, text=True, timeout=120, check=True
    ).stdout
