"""The traps a new user of the command met (issue 24), each refused with its own exit
status and a message that says what to do: input checked before any request, a missing
namespace or election is "not found", a misspelt store is never created, and every output
format and argument is there."""

from __future__ import annotations

import argparse
import json
import pathlib
import socket
from collections.abc import Iterator

import pytest
import yaml

import kubecoord
from kubecoord.cli import SUBCOMMANDS, build_parser
from tests.cli.conftest import FAST, Cli
from tests.helpers import eventually


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_bad_input_is_exit_2_before_any_request(plain_cli: Cli, tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"  # a server that does not answer: a request would be exit 6
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{_closed_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "apps"}}],
    }))
    for args in (["kv", "get", "topics", "a//b"], ["kv", "put", "topics", "/x", "v"], ["leader", "Bad Name"],
                 ["members", ""], ["kv", "ls", "topics", "a//"]):
        result = plain_cli(*args, "--kubeconfig", str(kubeconfig), "--timeout", "2")
        assert result.returncode == 2, (args, result.returncode, result.stderr)
        assert result.stderr.startswith(f"kubecoord {args[0]}: "), result.stderr


def test_a_missing_namespace_or_election_is_not_found(declared: tuple[Cli, pathlib.Path]) -> None:
    cli, _ = declared
    missing = cli("leader", "billing", "-n", "no-such-namespace")
    assert missing.returncode == 4 and "namespace 'no-such-namespace' does not exist" in missing.stderr
    undeclared = cli("leader", "biling")
    assert undeclared.returncode == 4, undeclared.stderr
    assert "no LeaderElection 'biling' in namespace 'apps'" in undeclared.stderr and "'billing'" in undeclared.stderr
    assert cli("members", "wrokers").returncode == 4
    # Declared, nobody leads yet: that is an answer, not an error.
    nobody = cli("leader", "billing", "-o", "json")
    assert nobody.returncode == 0 and json.loads(nobody.stdout)["leader"] is None


def test_a_misspelt_store_is_never_created(declared: tuple[Cli, pathlib.Path]) -> None:
    cli, path = declared
    typo = cli("kv", "put", "topcis", "k", "v")
    assert typo.returncode == 4 and "no KVStore 'topcis'" in typo.stderr and "Did you mean 'topics'" in typo.stderr
    with kubecoord.connect("kubernetes://apps", kubeconfig=str(path), **FAST) as coord:
        assert coord.storage("topcis").fetch("k").result(10) is None  # nothing was written
    assert cli("kv", "put", "topics", "k", "v").returncode == 0
    meant = cli("kv", "put", "topcis", "k", "v", "--create")
    assert meant.returncode == 0, meant.stderr


def test_every_output_format(declared: tuple[Cli, pathlib.Path]) -> None:
    cli, path = declared
    with kubecoord.connect("kubernetes://apps", kubeconfig=str(path), **FAST) as coord:
        coord.storage("topics").put("orders/config", "x" * 100)
        # A Lease that no LeaderElection declares (a client-go application's): it counts.
        election = coord.leader_election("plain-lease")
        election.nominate("pod-a", data="host=10.0.0.7")
        eventually(lambda: election.is_leader("pod-a"), timeout=30)
        assert cli("leader", "plain-lease", "-o", "name").stdout == "leaderelection/plain-lease\n"
        assert cli("leader", "plain-lease", "-o", "jsonpath={.leader}").stdout == "pod-a"
        assert yaml.safe_load(cli("leader", "plain-lease", "-o", "yaml").stdout)["leader"] == "pod-a"
        assert json.loads(cli("leader", "plain-lease", "-o", "json").stdout)["epoch"] >= 1
        table = cli("kv", "get", "topics", "orders/config").stdout
        wide = cli("kv", "get", "topics", "orders/config", "-o", "wide").stdout
        assert "x" * 100 not in table and "x" * 100 in wide  # wide cuts no cell short
        assert cli("kv", "ls", "topics", "orders", "-o", "name").stdout.splitlines() == ["key/orders/config"]
        names = cli("status", "-o", "name").stdout.splitlines()
        assert "leaderelection.kubecoord.dev/billing" in names and "kvstore.kubecoord.dev/topics" in names


def _actions(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_every_argument_has_help_without_markup(command: str) -> None:
    parser = build_parser(command)
    missing, markup = [], []
    for path, action in _actions(parser, "kubecoord"):
        if path.split()[1:2] not in ([command], []):
            continue
        where = f"{path} {'/'.join(action.option_strings) or action.dest}"
        if not action.help or action.help == argparse.SUPPRESS:
            missing.append(where)
        elif "``" in action.help or "TODO" in action.help or "XXX" in action.help:
            markup.append(where)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    for text in (sub.description or "", sub.epilog or ""):
        assert "``" not in text and ":func:" not in text, f"{command}: RST markup in its help"
    assert not missing, f"arguments without help: {missing}"
    assert not markup, f"markup or a note to developers in help: {markup}"


def test_one_exit_status_table_and_every_code_once() -> None:
    from kubecoord.analytics.cli import EXIT_MALFORMED
    from kubecoord.cli import exits

    codes = [code for code, _ in exits.MEANINGS]
    assert codes == sorted(set(codes)), "each exit status has exactly one meaning"
    used = {exits.OK, exits.ERROR, exits.USAGE, exits.VIOLATIONS, exits.NOT_FOUND, exits.CONFLICT,
            exits.UNAVAILABLE, exits.DENIED, exits.MALFORMED_INPUT, EXIT_MALFORMED}
    assert used <= set(codes)
    assert EXIT_MALFORMED == exits.MALFORMED_INPUT and EXIT_MALFORMED != exits.DENIED
