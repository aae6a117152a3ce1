"""The ``kubecoord`` command: see and change coordination state from a terminal.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int``; this module only wires them to argparse, turns kubecoord's errors
into the documented exit statuses (cli/exits.py) and keeps ``--help`` from importing
what a subcommand needs (no backend client, no JVM).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import kubecoord
from kubecoord.cli import exits
from kubecoord.connect import URL_FORMS

REACHABLE_URL_FORMS = [form for scheme, form in URL_FORMS.items() if scheme != "memory"]
"""The URL forms a command can reach: every backend but memory://, which lives in one process."""
_URL_LINES = "\n".join("  " + form for form in REACHABLE_URL_FORMS)

DESCRIPTION = f"""\
kubecoord: leader election, group membership and a key-value store for distributed
applications, over Kubernetes (Leases, ConfigMaps), ZooKeeper, Cassandra, etcd or memory.
Applications use the Python library (kubecoord.connect); this command lets a person or a
script see and change the same state: who leads, who is in a group, what a store holds, live.

Connection: every state command takes --url URL, one of
{_URL_LINES}
(default $KUBECOORD_URL, else the kubeconfig context's namespace), plus
--kubeconfig/--context for Kubernetes. memory:// lives inside one process: a
command cannot reach it.
"""

EPILOG = exits.table() + """

examples:
  kubecoord leader billing-controller -n prod
  kubecoord get leaderelection billing-controller -n prod -o jsonpath='{.leader}'
  kubecoord kv put topics orders/config '{"partitions": 3}' --url zookeeper://zk:2181/app
  kubecoord watch members workers -n prod
  kubecoord status -n prod -o json
  kubecoord lock nightly-report -n prod -- ./report.sh
  kubecoord elect billing-controller --id "$HOSTNAME" -n prod -- ./controller
"""

# name -> (module, one-line help). Modules are imported only when their
# subcommand runs, or for its own --help.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "leader": ("kubecoord.cli.leader", "who leads an election (id, epoch, data)"),
    "get": ("kubecoord.cli.get", "kubectl's spelling: get leaderelection|group|kvstore|lock NAME, get KINDS"),
    "members": ("kubecoord.cli.members", "the live members of a group"),
    "kv": ("kubecoord.cli.kv", "get, put, update, delete or list the keys of a store"),
    "watch": ("kubecoord.cli.watch", "a live table of a leader, a group or a store, redrawn in place"),
    "group": ("kubecoord.cli.group", "describe a group coordinator: generation, leader, assignment"),
    "elect": ("kubecoord.cli.elect", "run a command only while leading an election (SIGTERM to it on loss)"),
    "lock": ("kubecoord.cli.lock", "run a command while holding a lock, or show who holds it (--status)"),
    "status": ("kubecoord.cli.status", "every LeaderElection, Group and KVStore of a namespace, with health"),
    "operator": ("kubecoord.operator.cli", "run the operator (kopf) for the kubecoord.dev CRDs"),
    "analyze": ("kubecoord.analytics.cli", "analyze coordination event logs with PySpark; exit 3 on safety violations"),
    "completion": ("kubecoord.cli.completion", "print a bash or zsh completion script (kubecoord completion bash)"),
}

QUIET_COMMANDS = frozenset({"leader", "members", "kv", "watch", "status", "group", "get"})
"""Commands whose own output says what failed: the clients' warnings would only repeat it."""

READ_COMMANDS = frozenset({"leader", "members", "kv", "status"})
"""Quiet commands with a one-shot read path (cli/snapshot.py) that logs nothing: logging is
set up only if they open the backend (connection.open_coordinator), so the read path does
not import ``logging`` (about 10 ms of start-up: its regular expressions, traceback...)."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's, sized to the terminal without importing shutil: argparse imports it for
    every parser it builds (tens of milliseconds of every command's start-up)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:
            width = _columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's, with HelpFormatter by default: its subcommands' parsers (and theirs,
    such as ``kv get``) are made of this class too."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(**kwargs)


def _columns() -> int:
    """shutil.get_terminal_size()'s answer: $COLUMNS, else the terminal's, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class CommandLine:
    """A command made of subcommands, each in a module of its own that provides
    ``add_arguments(parser)`` and ``run(args) -> int``, imported only when its subcommand
    runs (or for its own ``--help``). The ``kubecoord`` command is one; kubecoord-testkit's
    command is another, built the same way.

    A plain class, not a dataclass: ``dataclasses`` imports ``inspect`` (with ``ast``,
    ``dis``, ``tokenize``), about 10 ms of every command's start-up on an idle machine
    (tests/cli/test_startup.py keeps it off the --help and state-command paths)."""

    __slots__ = ("description", "epilog", "logging_on_connect", "prog", "quiet", "rewrites", "subcommands",
                 "trailing_command", "version")

    def __init__(self, prog: str, description: str, epilog: str, subcommands: Mapping[str, tuple[str, str]],
                 quiet: frozenset[str] = frozenset(), *, version: str,
                 trailing_command: frozenset[str] = frozenset(),
                 logging_on_connect: frozenset[str] = frozenset(),
                 rewrites: tuple[str, frozenset[str]] | None = None) -> None:
        self.prog = prog
        self.description = description
        self.epilog = epilog
        self.subcommands = subcommands
        """name -> (module, one-line help)."""
        self.quiet = quiet
        """Subcommands that log at ERROR by default (their own output says what failed)."""
        self.version = version
        """What ``--version`` prints after ``prog``: the distribution's ``__version__`` constant
        (importlib.metadata would cost tens of milliseconds; a test checks both agree)."""
        self.trailing_command = trailing_command
        """Subcommands that take ``-- CMD ARGS...`` last: main() hands it over as ``args.cmd``."""
        self.logging_on_connect = logging_on_connect
        """Subcommands whose default log set-up waits for connection.open_coordinator()
        (``args.log_setup``): their read path logs nothing."""
        self.rewrites = rewrites
        """(module, subcommands): the module whose ``rewrite(arguments, at)`` reads other
        spellings of those subcommands' command lines (cli/habits.py), imported only for them."""

    def build_parser(self, selected: str | None, *, load_all: bool = False) -> argparse.ArgumentParser:
        """The parser; only ``selected``'s module is imported (every one with ``load_all``).

        With no subcommand named (``--help``, ``--version``, a usage error) no module is
        imported: the top-level help lists the subcommands from ``subcommands``, and an
        installation without the optional extras still answers.
        """
        parser = ArgumentParser(
            prog=self.prog,
            description=self.description,
            epilog=self.epilog,
        )
        parser.add_argument("--version", action=_version_action(f"{self.prog} {self.version}"), nargs=0,
                            default=argparse.SUPPRESS, help="print the installed version and exit")
        parser.add_argument(
            "--log-level", help="DEBUG, INFO, WARNING, ERROR (default: ERROR for the state commands, else WARNING)"
        )
        parser.add_argument("--log-format", choices=["json", "text"], default="json", help="default: %(default)s")
        sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for name, (module_name, help_text) in self.subcommands.items():
            sub_parser = sub.add_parser(name, help=help_text, description=help_text)
            if load_all or name == selected:
                module = importlib.import_module(module_name)
                description = (module.__doc__ or help_text).strip().replace("``", "")
                sub_parser.description = description
                module.add_arguments(sub_parser)
                sub_parser.set_defaults(_run=module.run)
        return parser

    def _selected(self, argv: Sequence[str]) -> str | None:
        """The subcommand named on the command line, skipping the global options."""
        at = self._position(argv)
        return argv[at] if at is not None else None

    def _position(self, argv: Sequence[str]) -> int | None:
        """Where the subcommand is on the command line (None: no known one)."""
        skip = False
        for index, arg in enumerate(argv):
            if skip:
                skip = False
                continue
            if arg in ("--log-level", "--log-format"):
                skip = True
            elif not arg.startswith("-"):
                return index if arg in self.subcommands else None
        return None

    def _rewritten(self, arguments: list[str]) -> list[str]:
        at = self._position(arguments)
        if self.rewrites is None or at is None or arguments[at] not in self.rewrites[1]:
            return arguments
        return list(importlib.import_module(self.rewrites[0]).rewrite(arguments, at))

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Parse ``argv`` (default: sys.argv), set up logging, run the subcommand; every
        error becomes one line and a documented exit status (cli/exits.py)."""
        arguments = self._rewritten(list(sys.argv[1:] if argv is None else argv))
        selected = self._selected(arguments)
        trailing: list[str] = []
        if selected in self.trailing_command and "--" in arguments:
            # Everything after the first -- is the command to run, options included
            # (argparse would match them against ours).
            split = arguments.index("--")
            arguments, trailing = arguments[:split], arguments[split + 1 :]
        parser = self.build_parser(selected)
        args = parser.parse_args(arguments)
        if getattr(args, "_run", None) is None:  # a subcommand argparse accepted but we did not load
            parser = self.build_parser(None, load_all=True)
            args = parser.parse_args(arguments)
        if selected in self.trailing_command:
            args.cmd = trailing
        # A state command reports its failure in one line; the client's own warnings (a
        # refused connection, a retry) would only repeat it.
        level = args.log_level or ("ERROR" if args.command in self.quiet else "WARNING")
        if args.command in self.logging_on_connect and not args.log_level:
            args.log_setup = (level, args.log_format)  # applied by connection.open_coordinator()
        else:
            from kubecoord.cli import logs  # with the subcommand: --help and --version need no logging set-up

            logs.configure(level, args.log_format)
        try:
            return int(args._run(args))
        except KeyboardInterrupt:
            return 130
        except Exception as error:  # every error becomes one line and a documented status
            if level.upper() == "DEBUG":  # the traceback too; the exit status stays the documented one
                import traceback

                traceback.print_exc()
            return exits.report(args.command, error, prog=self.prog)


def _version_action(text: str) -> type[argparse.Action]:
    """argparse's "version" action without its formatter: prints ``text`` on stdout, as
    argparse's own action does, and exits 0."""

    class _Version(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                     option_string: str | None = None) -> None:
            print(text)
            parser.exit()

    return _Version


KUBECOORD = CommandLine(
    "kubecoord", DESCRIPTION, EPILOG, SUBCOMMANDS, QUIET_COMMANDS, version=kubecoord.__version__,
    trailing_command=frozenset({"elect", "lock"}), logging_on_connect=READ_COMMANDS,
    rewrites=("kubecoord.cli.habits", frozenset({"get", "leader", "members", "lock"})),
)


def build_parser(selected: str | None, *, load_all: bool = False) -> argparse.ArgumentParser:
    """The ``kubecoord`` parser; only ``selected``'s module is imported (every one with ``load_all``)."""
    return KUBECOORD.build_parser(selected, load_all=load_all)


def main(argv: Sequence[str] | None = None) -> int:
    return KUBECOORD.main(argv)
