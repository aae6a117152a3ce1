"""The spellings users bring from kubectl and etcdctl, read as the command's own.

Rewritten on the command line before it is parsed, so each runs the one command that
does the work (same options, output and exit statuses):

    kubecoord get leaderelection NAME     kubecoord leader NAME        (also le, leaderelections, election)
    kubecoord get group NAME              kubecoord members NAME       (also groups, kcg)
    kubecoord get kvstore NAME [PREFIX]   kubecoord kv ls NAME [PREFIX] (also kvstores, kv, store)
    kubecoord get lock NAME               kubecoord lock NAME --status (also locks)
    kubecoord get leaderelections         kubecoord status --kind LeaderElection (a KIND without NAME:
                                          the resources of that kind; groups, kvstores alike)
    kubecoord leader get|show NAME        kubecoord leader NAME
    kubecoord members get|list|show GROUP kubecoord members GROUP
    kubecoord lock status|get|show NAME   kubecoord lock NAME --status

Options may come anywhere, as kubectl takes them (``kubecoord get -n prod le billing -o
json``). ``kv list`` is ``kv ls`` (an alias of the kv command's own parser). Standard
library only, and imported only when one of these commands is typed: the command's
start-up stays as it is (tests/cli/test_startup.py).
"""

from __future__ import annotations

from collections.abc import Sequence

KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "leaderelection": ("LeaderElection", ("leaderelections", "le", "election", "elections")),
    "group": ("Group", ("groups", "kcg")),
    "kvstore": ("KVStore", ("kvstores", "kv", "store", "stores")),
    "lock": ("", ("locks",)),
}
"""``get``'s KIND -> (the kind ``status --kind`` lists, "" for none), the other spellings."""

SPELLINGS = {spelling: kind for kind, (_, others) in KINDS.items() for spelling in (kind, *others)}

VERBS = {"leader": ("get", "show"), "members": ("get", "list", "show"), "lock": ("status", "get", "show")}
"""subcommand -> the etcdctl-style verbs that may come before its NAME."""

VALUE_OPTIONS = frozenset({"-o", "--output", "-u", "--url", "-n", "--namespace", "--kubeconfig", "--context",
                           "--timeout", "--log-level", "--log-format", "--wait", "--ttl", "--grace", "--id",
                           "--data", "--kind", "--interval"})
"""Options that take a value as the next argument (skipped when looking for KIND and NAME)."""

REWRITTEN = frozenset({"get", *VERBS})
"""The subcommands whose command lines this module may rewrite."""


def _positionals(arguments: Sequence[str]) -> list[int]:
    """Indexes of the positional arguments (not options, not option values), up to ``--``."""
    found: list[int] = []
    skip = False
    for index, argument in enumerate(arguments):
        if skip:
            skip = False
        elif argument == "--":
            break
        elif argument.startswith("-") and argument != "-":
            skip = argument in VALUE_OPTIONS
        else:
            found.append(index)
    return found


def rewrite(arguments: Sequence[str], at: int) -> list[str]:
    """``arguments`` with the subcommand at index ``at`` read as this module says; a command
    line that is not one of its spellings comes back unchanged (argparse then says what is
    wrong with it)."""
    head, command, rest = list(arguments[:at]), arguments[at], list(arguments[at + 1 :])
    places = _positionals(rest)
    if command == "get":
        if not places or rest[places[0]] not in SPELLINGS:
            return list(arguments)
        kind = SPELLINGS[rest[places[0]]]
        listed, _ = KINDS[kind]
        if len(places) == 1:
            if not listed:
                return list(arguments)  # get locks without NAME: the get parser says NAME is needed
            return [*head, "status", "--kind", listed, *_without(rest, places[:1])]
        name = rest[places[1]]
        # The other positionals (a PREFIX) right after NAME: argparse reads an optional
        # positional left behind options as absent.
        others = [rest[index] for index in places[2:]] + _without(rest, places)
        if kind == "leaderelection":
            return [*head, "leader", name, *others]
        if kind == "group":
            return [*head, "members", name, *others]
        if kind == "kvstore":
            return [*head, "kv", "ls", name, *others]
        return [*head, "lock", name, "--status", *others]
    if len(places) >= 2 and rest[places[0]] in VERBS.get(command, ()):
        others = [rest[index] for index in places[1:]] + _without(rest, places)
        if command == "lock" and "--status" not in others:
            others = [*others[:_end_of_options(others)], "--status", *others[_end_of_options(others) :]]
        return [*head, command, *others]
    return list(arguments)


def _without(arguments: list[str], indexes: list[int]) -> list[str]:
    return [argument for index, argument in enumerate(arguments) if index not in indexes]


def _end_of_options(arguments: list[str]) -> int:
    return arguments.index("--") if "--" in arguments else len(arguments)
