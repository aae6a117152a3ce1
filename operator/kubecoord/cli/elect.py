"""``kubecoord elect NAME [--id ID] -- CMD ARGS...``: run CMD only while leading NAME (etcdctl elect).

Runs for election; once leading, runs CMD with KUBECOORD_TOKEN (the epoch),
KUBECOORD_NAME (NAME) and KUBECOORD_HOLDER (the id) in its environment. When CMD exits, resigns and exits with
CMD's status. If leadership is lost, CMD's process group gets SIGTERM at once (before
another candidate can lead; SIGKILL after --grace) and kubecoord exits with CMD's status.
Once CMD ran, its status is the exit status even when resigning fails (the backend
unreachable after a loss): that is logged, and the term ends when its lease expires.
SIGTERM/SIGINT/SIGHUP to kubecoord: CMD gets SIGTERM, then kubecoord resigns and exits
with CMD's status. If kubecoord dies or freezes, the kernel and a watchdog process stop
CMD before another candidate can lead (cli/holding.py says how).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from kubecoord.cli.connection import add_connection_arguments
from kubecoord.cli.holding import HeldCommand, add_command_arguments
from kubecoord.running.identity import default_id

if TYPE_CHECKING:
    from kubecoord.api import Coordinator

NOT_LED = 1
"""Exit status when kubecoord stopped (a signal) before it ever led: CMD never ran."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the election (its Lease / znode path)")
    add_command_arguments(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    held = HeldCommand(args)
    candidate = args.id or default_id()

    def hold(coord: Coordinator) -> None:
        election = coord.leader_election(args.name)
        child = held.child(candidate, lambda: election.leading_until(candidate))
        # A loss ends the command and kubecoord with it: stop the runner from re-entering.
        election.run(child.run, held.stop.set, candidate_id=candidate, data=args.data, stop=held.stop)

    status = held.run(hold)
    return NOT_LED if status is None else status
