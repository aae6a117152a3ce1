"""``kubecoord leader NAME``: who leads an election, with its epoch and data.

Exit 0 whether or not someone leads (the table says <none>, JSON says null), once the
election exists; on kubernetes:// a missing namespace, or a NAME that neither a
LeaderElection nor a Lease declares, is exit 4 (not found). On kubernetes:// it reads the
Lease once (connection.one_shot), without the kubernetes client.
"""

from __future__ import annotations

import argparse

from kubecoord.cli import snapshot, views
from kubecoord.cli.connection import add_connection_arguments, read_state
from kubecoord.cli.output import add_output_argument, show
from kubecoord.validation import check_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the election (the service name given to leader_election)")
    add_output_argument(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    check_name(args.name, "election name")  # before any request: exit 2, nothing sent
    document = read_state(args, "leaderelections", args.name, lease=True,
                          objects=lambda api: views.leader(snapshot.election(api, args.name)),
                          backend=lambda coord: views.leader(coord.leader_election(args.name)))
    show(args.output, document, views.leader_table(document), kind="leaderelection", names=[args.name])
    return 0
