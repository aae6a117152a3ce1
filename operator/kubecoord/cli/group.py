"""``kubecoord group describe GROUP``: a group coordinator's generation, leader and assignment.

Reads what the group coordinator (kubecoord.group_coordinator, KIP-795) publishes — its
generation record (Coordinator.describe_group()), its leader election and the group's
live members — without joining.
Each member row says whether it is in the current generation, whether it is live (a
member of the group right now) and what it was assigned: the unit names for the units
protocol, else the size of the opaque assignment (``-o json`` has it in base64).
Exit 4 when no member ever joined GROUP through a group coordinator.
"""

from __future__ import annotations

import argparse
import base64
from typing import Any

from kubecoord.cli.connection import add_connection_arguments, open_coordinator
from kubecoord.cli.exits import NotFoundError
from kubecoord.cli.output import add_output_argument, print_table, show
from kubecoord.errors import CoordinationError
from kubecoord.group_coordinator import decode_units
from kubecoord.wire.group_record import derived_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    describe = actions.add_parser(
        "describe", help="generation, phase, leader and each member's assignment", description=__doc__
    )
    describe.add_argument("group", metavar="GROUP", help="the group (as given to group_coordinator)")
    add_output_argument(describe)
    add_connection_arguments(describe)


def run(args: argparse.Namespace) -> int:
    with open_coordinator(args) as coord:
        described = coord.describe_group(args.group, timeout=args.timeout)
        if described is None:
            raise NotFoundError(
                f"group {args.group!r} has no coordinator state: no member joined it through "
                "group_coordinator() (for plain membership use `kubecoord members`)"
            )
        with (
            coord.leader_election(derived_name(args.group)) as election,
            coord.group_membership(args.group) as group,
        ):
            leader = election.get_leader()
            live = group.membership_list()
    ids = sorted(set(described.members) | set(described.assignment))
    members = [
        {
            "id": member,
            "in_generation": member in described.members,
            "joined": member in described.joined,
            "live": member in live,
            **_assignment(described.protocol_type, described.assignment.get(member)),
        }
        for member in ids
    ]
    document: dict[str, Any] = {
        "group": args.group,
        "generation": described.generation,
        "phase": described.phase,
        "protocol_type": described.protocol_type,
        "protocol": described.protocol,
        "leader": described.leader,
        "leader_epoch": described.leader_epoch,
        "elected": leader.id if leader else None,
        "members": members,
        "not_in_generation": sorted(live - set(described.members)),
        "record_version": described.version,
    }
    if args.output not in ("table", "wide"):
        show(args.output, document, ([], []), kind="member", names=[m["id"] for m in members])
        return 0
    wide = args.output == "wide"
    print_table(
        ["GROUP", "GENERATION", "PHASE", "PROTOCOL", "LEADER", "EPOCH"],
        [
            [
                args.group,
                described.generation,
                described.phase,
                f"{described.protocol_type}/{described.protocol or '-'}",
                described.leader or "-",
                described.leader_epoch,
            ]
        ],
        wide=wide,
    )
    print()
    print_table(
        ["MEMBER", "IN-GENERATION", "LIVE", "ASSIGNMENT", *(["JOINED"] if wide else [])],
        [[m["id"], "yes" if m["in_generation"] else "no", "yes" if m["live"] else "no", m["shown"],
          *(["yes" if m["joined"] else "no"] if wide else [])] for m in members],
        wide=wide,
    )
    if document["not_in_generation"]:
        print(f"\nlive but not in generation {described.generation}: {', '.join(document['not_in_generation'])}")
    return 0


def _assignment(protocol_type: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {"assignment": None, "shown": "-"}
    if protocol_type == "units":
        try:
            units, _generation = decode_units(data)
        except CoordinationError:
            pass
        else:
            shown = ",".join(units) if units else "(none)"
            return {"assignment": units, "shown": f"{shown} ({len(units)})"}
    return {"assignment": base64.b64encode(data).decode(), "shown": f"<{len(data)} bytes>"}
