"""``kubecoord lock NAME -- CMD ARGS...``: run CMD while holding the lock NAME (etcdctl lock).

Waits for the lock (--wait SECONDS: give up, exit 5), runs CMD with KUBECOORD_TOKEN (the
fencing token), KUBECOORD_NAME (NAME) and KUBECOORD_HOLDER in its environment, releases when CMD exits and exits
with CMD's status. If the lock is lost, or kubecoord gets SIGTERM/SIGINT/SIGHUP, CMD's
process group gets SIGTERM (SIGKILL after --grace) and kubecoord exits with CMD's status.
If kubecoord dies or freezes, the kernel and a watchdog process stop CMD before anybody
else can hold the lock (cli/holding.py says how). --ttl: the lease/session the hold
outlives a stopped holder by.

``kubecoord lock NAME --status``: who holds it (id, token, data); exit 0 either way.
"""

from __future__ import annotations

import argparse
import threading

from kubecoord.cli.connection import add_connection_arguments, open_coordinator
from kubecoord.cli.exits import CONFLICT, UsageError
from kubecoord.cli.holding import Child, add_command_arguments, command_of, stopping_on_hangup, ttl_options
from kubecoord.cli.output import add_output_argument, show


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
    command = command_of(args)
    stop = threading.Event()
    with open_coordinator(args, **ttl_options(args)) as coord, stopping_on_hangup(stop):
        lock = coord.lock(args.name, id=args.id, data=args.data)
        child = Child(command, args.grace, args.name, lock.id, lock.held_until)
        lock.run(child.run, timeout=args.wait, stop=stop)
        if child.status is None:
            return CONFLICT  # not acquired within --wait (or stopped while waiting)
        return child.status


def _status(args: argparse.Namespace) -> int:
    with open_coordinator(args) as coord:
        holders = coord.lock(args.name).holders()
    document = [{"id": h.id, "token": h.token, "data": h.data} for h in holders]
    rows = [[h["id"], str(h["token"]), h["data"]] for h in document] or [["<none>", "", ""]]
    show(args.output, {"lock": args.name, "holders": document}, (["HOLDER", "TOKEN", "DATA"], rows),
         names=[str(h["id"]) for h in document])
    return 0
