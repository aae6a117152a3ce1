"""``kubecoord get KIND [NAME]``: kubectl's verb, for the hands that type it first.

``get leaderelection NAME`` is ``kubecoord leader NAME``, ``get group NAME`` is ``members
NAME``, ``get kvstore NAME [PREFIX]`` is ``kv ls NAME [PREFIX]``, ``get lock NAME`` is ``lock
NAME --status``; a KIND without NAME (``get leaderelections``) lists that kind's resources
as ``kubecoord status --kind`` does. Singular, plural and short names (le, kcg, kv) all
work, and options go anywhere (cli/habits.py rewrites the command line into the command
that does the work: its options, output and exit statuses are that command's).
"""

from __future__ import annotations

import argparse

from kubecoord.cli.exits import UsageError
from kubecoord.cli.habits import SPELLINGS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", metavar="KIND", choices=sorted(SPELLINGS),
                        help="leaderelection (le), group (kcg), kvstore (kv), lock; singular or plural")
    parser.add_argument("name", metavar="NAME", nargs="?", help="the election, group, store or lock")


def run(args: argparse.Namespace) -> int:
    # cli/habits.py rewrote every other form into its command before parsing.
    raise UsageError(f"get {args.kind} needs NAME: kubecoord get lock NAME (locks are not listed)")
