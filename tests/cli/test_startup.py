"""The command's start-up imports only what the command needs, checked by the modules it
leaves in sys.modules (no timing: bench/bench_cli.py times it).

--help and --version import no subcommand's module (no backend client, no kopf, no JVM),
and neither ``dataclasses`` (it imports ``inspect``, ``ast``, ``dis``), ``urllib.parse``,
``importlib.metadata`` nor the wire modules: fast, and working in an installation without
the optional extras. The state commands on kubernetes:// (leader, members, kv get, kv ls,
status) read through kubecoord.cli.snapshot: no kubernetes client, no backend, no
``dataclasses``, no ``importlib.metadata``, and no ``logging`` (set up only when a
command opens the backend: test_the_full_path_still_silences_the_clients_warnings)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version

import pytest

from kubecoord import Coordinator

from .conftest import Cli

PROBE = """
import sys
from kubecoord.cli import main
try:
    status = main({argv!r})
except SystemExit as exit:
    status = exit.code
print('STATUS', status)
print('MODULES', sorted(sys.modules))
"""

NEVER = ("kubernetes", "urllib3", "kopf", "kazoo", "cassandra", "pyspark", "prometheus_client", "pythonjsonlogger",
         "kubecoord_testkit", "kubecoord.api", "kubecoord.backends", "kubecoord._core", "kubecoord.operator",
         "kubecoord.analytics", "kubecoord.history", "dataclasses", "inspect", "importlib.metadata", "logging")
"""Modules (and their submodules) that no --help, --version or one-shot read imports."""

NOT_FOR_HELP = (*NEVER, "kubecoord.wire", "yaml", "ssl", "urllib.parse", "json", "difflib")
"""--help and --version also need none of the reading machinery."""


def imported(argv: list[str], env: dict[str, str] | None = None) -> tuple[object, list[str]]:
    """(exit status, modules in sys.modules afterwards) of ``kubecoord ARGV`` in a fresh process."""
    result = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                            check=True, env=env, timeout=120)
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.startswith(("STATUS", "MODULES")))
    return ast.literal_eval(lines["STATUS"]), ast.literal_eval(lines["MODULES"])


def among(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


@pytest.mark.parametrize("argv", [["--help"], ["--version"], []])
def test_top_level_help_and_version_import_no_subcommand(argv: list[str]) -> None:
    status, modules = imported(argv)
    assert status == (2 if not argv else 0)
    # kubecoord.cli.exits is the shared error table, imported by the command itself.
    assert [m for m in modules if m.startswith("kubecoord.cli.")] == ["kubecoord.cli.exits"]
    assert among(modules, NOT_FOR_HELP) == []


def test_state_commands_import_no_client_and_no_dataclasses(
    k8s_cli: Cli, k8s_connect: Callable[[], Coordinator]
) -> None:
    coord = k8s_connect()
    assert coord.leader_election("billing").nominate("pod-a")
    coord.group_membership("workers").join("w1")
    coord.storage("topics").put("orders/config", "partitions=3")
    for argv in (["leader", "billing"], ["members", "workers"], ["kv", "get", "topics", "orders/config"],
                 ["kv", "ls", "topics"], ["status"], ["leader", "billing", "-o", "json"]):
        status, modules = imported(argv, k8s_cli.env)
        # status lists the custom resources: exit 4 on the emulator, which has no CRDs installed.
        assert status == (4 if argv == ["status"] else 0), argv
        assert "kubecoord.cli.snapshot" in modules or argv == ["status"], argv  # the read path, not the backend
        assert among(modules, NEVER) == [], argv


def test_version_is_the_installed_distributions() -> None:
    result = subprocess.run([sys.executable, "-m", "kubecoord.cli", "--version"], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == f"kubecoord {version('kubecoord')}"
    testkit = subprocess.run([sys.executable, "-m", "kubecoord_testkit", "--version"], capture_output=True,
                             text=True, check=True)
    assert testkit.stdout.strip() == f"kubecoord-testkit {version('kubecoord-testkit')}"


LOGGING_PROBE = PROBE + """
import logging
root = logging.getLogger()
print('ROOT', logging.getLevelName(root.level), [type(f).__name__ for h in root.handlers for f in h.filters])
"""


def test_the_full_path_still_silences_the_clients_warnings(plain_cli: Cli) -> None:
    """A read command that opens the backend (zookeeper://, here unreachable) sets logging
    up there, as every command did before: the root logger at ERROR with the command's
    handler, so the client's warnings stay off; the failure is one line."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = ["leader", "x", "--url", f"zookeeper://127.0.0.1:{port}/c", "--timeout", "2"]
    result = subprocess.run([sys.executable, "-c", LOGGING_PROBE.format(argv=argv)], capture_output=True, text=True,
                            check=True, env=plain_cli.env, timeout=120)
    assert "STATUS 6" in result.stdout, result.stdout + result.stderr
    assert "ROOT ERROR ['KopfRecordFilter']" in result.stdout, result.stdout
    assert result.stderr.startswith("kubecoord leader:") and result.stderr.count("\n") == 1, result.stderr

