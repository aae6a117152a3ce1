"""``kubecoord leader NAME``: who leads an election, with its epoch and data.

Exit 0 whether or not someone leads (the table says <none>, JSON says null).
"""

from __future__ import annotations

import argparse

from kubecoord.cli import views
from kubecoord.cli.connection import add_connection_arguments, open_coordinator
from kubecoord.cli.output import add_output_argument, show


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the election (the service name given to leader_election)")
    add_output_argument(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    with open_coordinator(args) as coord, coord.leader_election(args.name) as election:
        document = views.leader(election)
    show(args.output, document, views.leader_table(document))
    return 0
