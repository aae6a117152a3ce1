"""``kubecoord members GROUP``: the live members of a group and their data.

On kubernetes:// a missing namespace, or a GROUP no Group resource declares (when the
CRDs are installed), is exit 4 (not found). On kubernetes:// it lists the group's member
Leases once (connection.one_shot), without the kubernetes client."""

from __future__ import annotations

import argparse

from kubecoord.cli import snapshot, views
from kubecoord.cli.connection import add_connection_arguments, read_state
from kubecoord.cli.output import add_output_argument, show
from kubecoord.validation import check_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", metavar="GROUP", help="the group name (as given to group_membership)")
    add_output_argument(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    check_name(args.group, "group name")  # before any request: exit 2, nothing sent
    document = read_state(args, "groups", args.group,
                          objects=lambda api: views.members(snapshot.group(api, args.group)),
                          backend=lambda coord: views.members(coord.group_membership(args.group)))
    show(args.output, document, views.members_table(document), empty=f"no members in group {args.group!r}",
         kind="member", names=[member["id"] for member in document["members"]])
    return 0
