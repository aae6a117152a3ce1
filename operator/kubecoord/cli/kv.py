"""``kubecoord kv get|put|update|delete|ls STORE [KEY]``: read and write a KV store (``kv list``
is ``kv ls``).

put creates (exit 5 if the key exists), update overwrites (exit 4 if absent), both
print the key's new version; ``--expected-version`` makes update and delete conditional
(exit 5 when stale); ``--fence NAME:TOKEN`` makes put, update and delete fenced writes
(kubecoord.api.Storage; exit 5 when a higher token of NAME was accepted). A VALUE of ``-`` is read from standard input.

STORE, KEY and PREFIX are checked before anything is sent (exit 2). On kubernetes://,
with the CRDs installed, a STORE that no KVStore declares is exit 4 with the declared
names that look alike — a typo never creates a store; ``put --create`` writes to an
undeclared store on purpose. get and ls on kubernetes:// read the store's ConfigMaps once
(connection.one_shot), without the kubernetes client.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from kubecoord.cli import snapshot, views
from kubecoord.cli.connection import add_connection_arguments, check_declared, open_coordinator, read_state
from kubecoord.cli.exits import NotFoundError
from kubecoord.cli.output import add_output_argument, show
from kubecoord.errors import InvalidArgumentError
from kubecoord.validation import check_fence, check_key, check_name, check_namespace

if TYPE_CHECKING:
    from kubecoord.api import Fence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help_text: str, aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text, aliases=list(aliases))
        sub.set_defaults(action=name)  # the action's own name, also when an alias was typed
        sub.add_argument("store", metavar="STORE", help="the store name (as given to storage)")
        return sub

    get = action("get", "print a key's value and version (exit 4 if absent)")
    get.add_argument("key", metavar="KEY", help="the key, a /-separated path, e.g. topics/orders/config")
    add_output_argument(get, extra=["value"])

    for name, help_text in (
        ("put", "create a key (exit 5 if it exists); prints its version"),
        ("update", "overwrite a key (exit 4 if absent); prints its new version"),
    ):
        write = action(name, help_text)
        write.add_argument("key", metavar="KEY", help="the key, a /-separated path, e.g. topics/orders/config")
        write.add_argument("value", metavar="VALUE", help="the value; - reads it from standard input")
        write.add_argument("--create", action="store_true",
                           help="write even if no KVStore declares STORE (kubernetes://; without it a typo is exit 4)")
        if name == "update":
            write.add_argument("--expected-version", type=int, metavar="N", help="only if the key is at version N")
        _add_fence_argument(write)
        add_output_argument(write)

    delete = action("delete", "delete a key (exit 4 if absent)")
    delete.add_argument("key", metavar="KEY", help="the key, a /-separated path")
    delete.add_argument("--expected-version", type=int, metavar="N", help="only if the key is at version N")
    _add_fence_argument(delete)
    add_output_argument(delete)

    ls = action("ls", "list the keys under a namespace (default: the top level) with versions and values",
                aliases=("list",))
    ls.add_argument("key", metavar="PREFIX", nargs="?", default="",
                    help="a parent path whose keys to list, e.g. topics/orders (default: the top level)")
    ls.add_argument("-r", "--recursive", action="store_true", help="every key below NAMESPACE, not just children")
    add_output_argument(ls)

    for sub in {id(sub): sub for sub in actions.choices.values()}.values():  # an alias maps to its parser too
        add_connection_arguments(sub)


def _add_fence_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fence", metavar="NAME:TOKEN",
        help="a fenced write: refused (exit 5, nothing written) if the store accepted a higher token of the "
             "lock or election NAME, e.g. --fence nightly:$KUBECOORD_TOKEN under kubecoord lock",
    )


def _fence(raw: str | None) -> Fence | None:
    """``NAME:TOKEN`` as a Fence (exit 2 before any request when malformed)."""
    if raw is None:
        return None
    from kubecoord.api import Fence  # here: the interface's imports stay off --help's path

    name, sep, token = raw.rpartition(":")
    if not sep or not token.isdigit():
        raise InvalidArgumentError(f"--fence must be NAME:TOKEN (a lock or election and its token), got {raw!r}")
    check_fence(name, int(token))
    return Fence(name, int(token))


def _value(raw: str) -> str:
    return sys.stdin.read() if raw == "-" else raw


def _check(args: argparse.Namespace) -> None:
    """Every name and key before any request (exit 2, nothing sent)."""
    check_name(args.store, "store name")
    _fence(getattr(args, "fence", None))
    if args.action == "ls":
        check_namespace(args.key)
    else:
        check_key(args.key)


def _read(args: argparse.Namespace, storage: views.StoreLike) -> int:
    """kv get or kv ls, from a handle or a one-shot snapshot (the same output either way)."""
    if args.action == "get":
        versioned = storage.fetch_versioned(args.key).result(args.timeout)
        if versioned is None:
            raise NotFoundError(f"no key {args.key!r} in store {args.store!r}")
        document = {"store": args.store, "key": args.key, "value": versioned.value, "version": versioned.version}
        if args.output == "value":
            sys.stdout.write(versioned.value + ("" if versioned.value.endswith("\n") else "\n"))
        else:
            rows = [[args.key, versioned.version, versioned.value]]
            wide = (["KEY", "VERSION", "SIZE", "VALUE"], [[args.key, versioned.version, len(versioned.value.encode()),
                                                        versioned.value]])
            show(args.output, document, (["KEY", "VERSION", "VALUE"], rows), kind="key", names=[args.key], wide=wide)
        return 0
    listing = views.keys(storage, args.key, recursive=args.recursive, timeout=args.timeout)
    empty = f"no keys under {args.key or 'the top level'!r} in store {args.store!r}"
    names = [str(entry.get("key")) for entry in listing.get("keys", [])]
    show(args.output, listing, views.keys_table(listing), empty=empty, kind="key", names=names,
         wide=views.keys_table(listing, wide=True))
    return 0


def run(args: argparse.Namespace) -> int:
    _check(args)
    if args.action in ("get", "ls"):
        key = args.key if args.action == "get" else None
        return read_state(args, "kvstores", args.store,
                          objects=lambda api: _read(args, snapshot.store(api, args.store, key=key)),
                          backend=lambda coord: _read(args, coord.storage(args.store)))
    check_declared(args, "kvstores", args.store, create=getattr(args, "create", False))
    with open_coordinator(args) as coord, coord.storage(args.store) as storage:
        fence = _fence(args.fence)
        if args.action == "put":
            version: int | None = storage.put(args.key, _value(args.value), fence=fence)
            verb = "created"
        elif args.action == "update":
            version = storage.update(args.key, _value(args.value), expected_version=args.expected_version, fence=fence)
            verb = "updated"
        else:
            storage.delete(args.key, expected_version=args.expected_version, fence=fence)
            version, verb = None, "deleted"
    if args.output not in ("table", "wide"):
        show(args.output, {"store": args.store, "key": args.key, "result": verb, "version": version}, ([], []),
             kind="key", names=[args.key])
    else:
        print(f"{verb} {args.key!r} in store {args.store!r}" + (f" (version {version})" if version else ""))
    return 0
