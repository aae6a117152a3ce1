"""The ``kubecoord-testkit`` command: the soak, the demos, the API emulator and the history
generator, from a terminal (``python -m kubecoord_testkit`` runs it too).

Built like the ``kubecoord`` command (kubecoord.cli.CommandLine): each subcommand lives in
its own module with ``add_arguments(parser)`` and ``run(args) -> int``, imported only when
it runs, and errors become the exit statuses of kubecoord.cli.exits.
"""

from __future__ import annotations

from collections.abc import Sequence

import kubecoord_testkit
from kubecoord.cli import CommandLine

DESCRIPTION = """\
kubecoord-testkit: the test tooling of kubecoord. Runs the multi-process soak under
seeded faults, the robustness tier (histories judged by Porcupine), the demos, a
Kubernetes API emulator in the foreground, and writes synthetic coordination event logs
for the analytics pipeline (kubecoord analyze).
"""

EPILOG = """\
exit statuses: 0 ok, 1 unexpected error, 2 bad usage, 3 safety violations (soak, robustness).

examples:
  kubecoord-testkit demo
  kubecoord-testkit soak --backend zookeeper,emulator --duration 300 --seed 1 --out soak-out
  kubecoord-testkit robustness --backend memory,zookeeper --duration 60 --out robustness-out
  kubecoord-testkit storm --seconds 600 --faults kill,freeze,hold,send-freeze,restart --out storm-out
  kubecoord-testkit emulator --port 0 --kubeconfig /tmp/kubeconfig
  kubecoord-testkit generate-history --out /tmp/logs --elections 20
"""

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "soak": (
        "kubecoord_testkit.soak.cli",
        "client processes under a seeded fault schedule, then the pipeline; exit 3 on violations",
    ),
    "robustness": (
        "kubecoord_testkit.robustness.cli",
        "client traffic under faults, histories judged by Porcupine; exit 3 on a violation",
    ),
    "storm": (
        "kubecoord_testkit.storm.cli",
        "two operator replicas under kill -9, freezes, held connections on a whole cluster; exit 3 on a violation",
    ),
    "demo": ("kubecoord_testkit.demos.cli", "run the demo scenario"),
    "emulator": ("kubecoord_testkit.emulator.cli", "run the Kubernetes API emulator in the foreground"),
    "generate-history": ("kubecoord_testkit.history_generator", "write synthetic coordination event logs"),
}

QUIET_COMMANDS = frozenset({"soak", "robustness", "storm"})
"""The soak's own output says what failed: the clients' warnings would only repeat it."""

TESTKIT = CommandLine(
    "kubecoord-testkit", DESCRIPTION, EPILOG, SUBCOMMANDS, QUIET_COMMANDS, version=kubecoord_testkit.__version__
)


def main(argv: Sequence[str] | None = None) -> int:
    return TESTKIT.main(argv)
