"""``kubecoord lock NAME -- CMD ARGS...``: run CMD while holding the lock NAME (etcdctl lock).

Waits for the lock (--wait SECONDS: give up, exit 5, saying who holds it), runs CMD with KUBECOORD_TOKEN (the
fencing token), KUBECOORD_NAME (NAME) and KUBECOORD_HOLDER in its environment, releases when CMD exits and exits
with CMD's status. If the lock is lost, or kubecoord gets SIGTERM/SIGINT/SIGHUP, CMD's
process group gets SIGTERM (SIGKILL after --grace) and kubecoord exits with CMD's status,
also when releasing fails (the backend unreachable after a loss: logged; the hold ends
when its lease or session expires). If kubecoord dies or freezes, the kernel and a
watchdog process stop CMD before anybody else can hold the lock (cli/holding.py says
how). --ttl: the lease/session the hold outlives a stopped holder by.

``kubecoord lock NAME --status``: who holds it (id, token, data); exit 0 held or free. A
lock is an election record (coord.lock(NAME) holds the election NAME), so it is not found
as ``kubecoord leader`` does not find an election: on kubernetes:// a missing namespace,
or a NAME that neither a LeaderElection nor a Lease declares (a lock never held), is exit
4; there the Lease is read once (connection.one_shot), without the kubernetes client.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kubecoord.cli import snapshot
from kubecoord.cli.connection import add_connection_arguments, read_state
from kubecoord.cli.exits import CONFLICT, CommandError, UsageError
from kubecoord.cli.holding import HeldCommand, add_command_arguments
from kubecoord.cli.output import add_output_argument, show

if TYPE_CHECKING:
    from kubecoord.api import Coordinator, Lock


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the lock (coord.lock(NAME); the Lease / election NAME)")
    parser.add_argument("--status", action="store_true", help="print who holds the lock, run nothing")
    parser.add_argument("--wait", type=float, metavar="SECONDS", help="give up (exit 5) after waiting this long")
    add_command_arguments(parser)
    add_output_argument(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.status:
        if args.cmd:
            raise UsageError("--status runs no command")
        return _status(args)
    held = HeldCommand(args)

    def hold(coord: Coordinator) -> None:
        lock = coord.lock(args.name, id=args.id, data=args.data)
        child = held.child(lock.id, lock.held_until)
        lock.run(child.run, timeout=args.wait, stop=held.stop)
        if child.status is None:  # not acquired within --wait, or stopped while waiting
            holders = ", ".join(f"{h.id} (token {h.token})" for h in lock.holders()) or "nobody now"
            waited = f"within --wait {args.wait:g} s" if not held.stop.is_set() else "before it was stopped"
            raise CommandError(f"lock {args.name!r} not acquired {waited}; held by {holders}; CMD not run",
                               CONFLICT)

    status = held.run(hold)
    assert status is not None  # else raised above
    return status


def _status(args: argparse.Namespace) -> int:
    holders = read_state(args, "leaderelections", args.name, lease=True,
                         objects=lambda api: _lease_holders(snapshot.election(api, args.name)),
                         backend=lambda coord: _lock_holders(coord.lock(args.name)))
    rows = [[h["id"], str(h["token"]), h["data"]] for h in holders] or [["<none>", "", ""]]
    wide = [[h["id"], str(h["token"]), h["slot"], h["data"]] for h in holders] or [["<none>", "", "", ""]]
    show(args.output, {"lock": args.name, "holders": holders}, (["HOLDER", "TOKEN", "DATA"], rows),
         kind="holder", names=[str(h["id"]) for h in holders], wide=(["HOLDER", "TOKEN", "SLOT", "DATA"], wide))
    return 0


def _lease_holders(election: snapshot.ElectionSnapshot) -> list[dict[str, Any]]:
    """kubernetes://: the lock's Lease read once, as kubecoord leader reads it."""
    leader = election.get_leader()
    return [{"id": leader.id, "token": leader.epoch, "data": leader.data, "slot": 0}] if leader else []


def _lock_holders(lock: Lock) -> list[dict[str, Any]]:
    return [{"id": h.id, "token": h.token, "data": h.data, "slot": h.slot} for h in lock.holders()]
