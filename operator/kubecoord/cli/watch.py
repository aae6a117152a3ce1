"""``kubecoord watch leader NAME | members GROUP | kv STORE [NAMESPACE]``: a live table.

Like ``kubectl get -w``, but the table redraws in place on a terminal. It changes when
the backend's listeners say something changed, and is re-read every ``--interval``
seconds as a backstop; a frame is drawn only when the state differs from the last one.
Backend errors are shown in the header and retried; Ctrl-C or SIGTERM stops it (exit 0).
With ``-o json`` each new state is one JSON document on its own line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import signal
import sys
import threading
from collections.abc import Callable
from contextlib import ExitStack
from types import FrameType
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.cli import views
from kubecoord.cli.connection import add_connection_arguments, open_coordinator
from kubecoord.cli.exits import UsageError
from kubecoord.cli.live import LiveView
from kubecoord.cli.output import add_output_argument, print_json, table
from kubecoord.errors import CoordinationError

Reader = Callable[[], views.Document]
Tabulate = Callable[[views.Document], tuple[list[str], list[list[Any]]]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    leader = kinds.add_parser("leader", help="the leader of an election", description="the leader of an election")
    leader.add_argument("target", metavar="NAME", help="the election (the service name given to leader_election)")
    members = kinds.add_parser("members", help="the members of a group", description="the members of a group")
    members.add_argument("target", metavar="GROUP", help="the group (as given to group_membership)")
    kv = kinds.add_parser("kv", help="the keys of a store", description="the keys (direct children) of a store")
    kv.add_argument("target", metavar="STORE", help="the store (as given to storage)")
    kv.add_argument("namespace", metavar="PREFIX", nargs="?", default="",
                    help="a parent path whose direct children to show, e.g. topics/orders (default: the top level)")
    for sub in kinds.choices.values():
        sub.add_argument(
            "--interval", type=float, default=2.0, metavar="SECONDS", help="re-read at least this often (default 2)"
        )
        add_output_argument(sub, formats=("table", "json"))
        add_connection_arguments(sub)


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise UsageError(f"--interval must be positive, not {args.interval:g}")
    changed = threading.Event()
    stopping = threading.Event()

    def on_change(*_: Any) -> None:
        changed.set()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()
        changed.set()

    previous = signal.signal(signal.SIGTERM, stop)
    previous_int = signal.signal(signal.SIGINT, stop)
    try:
        with ExitStack() as stack:
            coord = stack.enter_context(open_coordinator(args))
            read, tabulate, title = _subscribe(coord, args, on_change, stack)
            _loop(args, read, tabulate, title, changed, stopping)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    return 0


def _subscribe(
    coord: Coordinator, args: argparse.Namespace, on_change: Callable[..., None], stack: ExitStack
) -> tuple[Reader, Tabulate, str]:
    if args.kind == "leader":
        election = stack.enter_context(coord.leader_election(args.target))
        election.add_listener(on_change)
        return (lambda: views.leader(election)), views.leader_table, f"election {args.target}"
    if args.kind == "members":
        group = stack.enter_context(coord.group_membership(args.target))
        group.add_listener(on_change)
        return (lambda: views.members(group)), views.members_table, f"group {args.target}"
    storage = stack.enter_context(coord.storage(args.target))
    registry = stack.enter_context(coord.listener_registry(args.target))
    watched: set[str] = set()

    def on_keys(names: set[str]) -> None:
        # Follow each key's value too: a key set listener does not fire on a rewrite.
        for name in names - watched:
            watched.add(name)
            registry.add_value_change_listener(views.join_key(args.namespace, name), on_change)
        on_change()

    registry.add_key_set_change_listener(args.namespace, on_keys)
    on_keys(storage.children(args.namespace))

    def read() -> views.Document:
        return views.keys(storage, args.namespace, timeout=args.timeout)

    where = f" under {args.namespace!r}" if args.namespace else ""
    return read, views.keys_table, f"store {args.target}{where}"


def _loop(
    args: argparse.Namespace,
    read: Reader,
    tabulate: Tabulate,
    title: str,
    changed: threading.Event,
    stopping: threading.Event,
) -> None:
    view = LiveView(sys.stdout, in_place=sys.stdout.isatty() and args.output == "table")
    last: views.Document | None = None
    last_error: str | None = None
    updates = 0
    while not stopping.is_set():
        changed.clear()
        document: views.Document | None
        error: str | None
        try:
            document, error = read(), None
        except CoordinationError as exc:
            document, error = last, f"{type(exc).__name__}: {exc}"
        if document is not None and (document != last or error != last_error):
            if document != last:
                updates += 1
            # Date and zone always: a line read tomorrow, or in another zone, says when it was.
            now = dt.datetime.now().astimezone()
            if args.output == "json":
                if error is None:
                    print_json({"time": now.isoformat(timespec="milliseconds"), **document}, compact=True)
            else:
                header = f"kubecoord watch: {title}   {now.strftime('%Y-%m-%d %H:%M:%S %Z')}   changes: {updates - 1}"
                if error:
                    header += f"   ERROR (retrying): {error}"
                view.draw([header, "", *table(*tabulate(document))])
            last, last_error = document, error
        elif document is None and error and error != last_error:
            print(f"kubecoord watch: {error} (retrying)", file=sys.stderr)
            last_error = error
        changed.wait(args.interval)
