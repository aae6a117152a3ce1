"""leader, members and kv from a terminal: tables, JSON, errors and their exit statuses."""

from __future__ import annotations

import json
import pathlib
import socket
from collections.abc import Callable

import pytest

import kubecoord
from kubecoord import Coordinator, Versioned
from kubecoord.cli import exits
from kubecoord_testkit.emulator import ApiEmulator

from .conftest import Cli


def test_top_level_help_says_what_the_tool_is_for(plain_cli: Cli) -> None:
    result = plain_cli("--help")
    assert result.returncode == 0
    assert "leader election, group membership and a key-value store" in result.stdout
    for command in (
        "leader",
        "members",
        "kv",
        "watch",
        "group",
        "status",
        "operator",
        "analyze",
    ):
        assert f"\n    {command}" in result.stdout, command
    for command in TESTKIT_COMMANDS:  # test tooling is kubecoord-testkit's
        assert f"\n    {command}" not in result.stdout, command
    assert "exit statuses:" in result.stdout and "  4  not found" in result.stdout
    assert plain_cli().returncode == exits.USAGE


TESTKIT_COMMANDS = ("soak", "robustness", "demo", "emulator", "generate-history")


def test_testkit_help_lists_the_tooling_commands(plain_cli: Cli) -> None:
    result = plain_cli.testkit("--help")
    assert result.returncode == 0, result.stderr
    for command in TESTKIT_COMMANDS:
        assert f"\n    {command}" in result.stdout, command
    assert plain_cli.testkit().returncode == exits.USAGE


@pytest.mark.parametrize(
    ("prog", "command"),
    [
        ("kubecoord", "operator"),
        ("kubecoord", "analyze"),
        *(("kubecoord-testkit", command) for command in TESTKIT_COMMANDS),
    ],
)
def test_existing_subcommands_still_answer(plain_cli: Cli, prog: str, command: str) -> None:
    result = (plain_cli.testkit if prog == "kubecoord-testkit" else plain_cli)(command, "--help")
    assert result.returncode == 0, result.stderr
    assert f"usage: {prog} {command}" in result.stdout


def test_leader_as_table_and_json(k8s_cli: Cli, k8s_connect: Callable[[], Coordinator]) -> None:
    assert k8s_cli.json("leader", "billing") == {"election": "billing", "leader": None, "epoch": None, "data": None}
    election = k8s_connect().leader_election("billing")
    assert election.nominate("pod-a", data="10.0.0.7:8080")
    document = k8s_cli.json("leader", "billing")
    assert document["leader"] == "pod-a" and document["data"] == "10.0.0.7:8080" and document["epoch"] >= 1
    table = k8s_cli("leader", "billing")
    assert table.returncode == 0
    header, row = table.stdout.splitlines()
    assert header.split() == ["ELECTION", "LEADER", "EPOCH", "DATA"]
    assert row.split() == ["billing", "pod-a", str(document["epoch"]), "10.0.0.7:8080"]


def test_members(k8s_cli: Cli, k8s_connect: Callable[[], Coordinator]) -> None:
    assert "no members" in k8s_cli("members", "workers").stdout
    group = k8s_connect().group_membership("workers")
    group.join("w2", data="b")
    group.join("w1", data="a")
    assert k8s_cli.json("members", "workers") == {
        "group": "workers",
        "members": [{"id": "w1", "data": "a"}, {"id": "w2", "data": "b"}],
    }
    lines = k8s_cli("members", "workers").stdout.splitlines()
    assert [line.split() for line in lines] == [["MEMBER", "DATA"], ["w1", "a"], ["w2", "b"]]


# 17 command processes, each importing the CLI: ~20 s on an idle machine, past the default
# 180 s at load 30 (seen twice in make test beside other work).
@pytest.mark.timeout(480)
def test_kv_round_trip_and_exit_statuses(k8s_cli: Cli, k8s_connect: Callable[[], Coordinator]) -> None:
    created = k8s_cli("kv", "put", "topics", "orders/config", '{"partitions": 3}')
    assert created.returncode == 0, created.stderr
    assert "version 1" in created.stdout
    again = k8s_cli("kv", "put", "topics", "orders/config", "x")
    assert again.returncode == exits.CONFLICT and "already exists" in again.stderr
    assert k8s_cli("kv", "get", "topics", "orders/config", "-o", "value").stdout == '{"partitions": 3}\n'
    assert k8s_cli.json("kv", "get", "topics", "orders/config") == {
        "store": "topics",
        "key": "orders/config",
        "value": '{"partitions": 3}',
        "version": 1,
    }
    # The library sees what the command wrote, and the other way round.
    storage = k8s_connect().storage("topics")
    assert storage.fetch("orders/config").result(10) == '{"partitions": 3}'
    storage.put("orders/owner", "team-a")

    stale = k8s_cli("kv", "update", "topics", "orders/config", "y", "--expected-version", "7")
    assert stale.returncode == exits.CONFLICT
    updated = k8s_cli("kv", "update", "topics", "orders/config", "-", "--expected-version", "1", stdin="from\nstdin")
    assert updated.returncode == 0 and "version 2" in updated.stdout
    assert storage.fetch("orders/config").result(10) == "from\nstdin"

    missing = k8s_cli("kv", "get", "topics", "nope")
    assert missing.returncode == exits.NOT_FOUND and "no key 'nope'" in missing.stderr
    assert k8s_cli("kv", "update", "topics", "nope", "v").returncode == exits.NOT_FOUND
    assert k8s_cli("kv", "delete", "topics", "nope").returncode == exits.NOT_FOUND

    k8s_cli("kv", "put", "topics", "top", "1")
    top = k8s_cli("kv", "ls", "topics").stdout.splitlines()
    assert [line.split() for line in top] == [["KEY", "VERSION", "VALUE"], ["orders/", "-"], ["top", "1", "1"]]
    listing = k8s_cli.json("kv", "ls", "topics", "-r")
    assert [(e["key"], e["version"]) for e in listing["keys"]] == [
        ("orders/config", 2),
        ("orders/owner", 1),
        ("top", 1),
    ]
    # A table row stays one line: the newline is shown escaped.
    assert "from\\nstdin" in k8s_cli("kv", "ls", "topics", "orders").stdout

    assert k8s_cli("kv", "delete", "topics", "top", "--expected-version", "1").returncode == 0
    assert storage.fetch("top").result(10) is None


@pytest.mark.timeout(300)
def test_kv_fenced_writes_and_their_exit_statuses(k8s_cli: Cli, k8s_connect: Callable[[], Coordinator]) -> None:
    assert k8s_cli("kv", "put", "fenced", "k", "a", "--fence", "job:5").returncode == 0
    stale = k8s_cli("kv", "update", "fenced", "k", "b", "--fence", "job:4")
    assert stale.returncode == exits.CONFLICT and "fenced by 'job'" in stale.stderr
    malformed = k8s_cli("kv", "delete", "fenced", "k", "--fence", "job")
    assert malformed.returncode == exits.USAGE and "NAME:TOKEN" in malformed.stderr
    assert k8s_cli("kv", "update", "fenced", "k", "c", "--fence", "job:5").returncode == 0  # the same holder
    assert k8s_connect().storage("fenced").fetch_versioned("k").result(10) == Versioned("c", 2)


def test_bad_input_fails_before_any_request(k8s_cli: Cli, plain_cli: Cli) -> None:
    bad_name = k8s_cli("leader", "Not_A_Label")
    assert bad_name.returncode == exits.USAGE and "kubecoord leader:" in bad_name.stderr
    memory = plain_cli("leader", "x", "--url", "memory://")
    assert memory.returncode == exits.USAGE and "inside one process" in memory.stderr
    unknown = plain_cli("leader", "x", "--url", "consul://h")
    assert unknown.returncode == exits.USAGE and "installed backends" in unknown.stderr
    assert plain_cli("leader", "x", "--url", "zookeeper://h:1/c", "--context", "c").returncode == exits.USAGE
    assert plain_cli("kv", "get", "s").returncode == exits.USAGE  # argparse: KEY missing
    assert bad_name.stdout == ""


def test_unreachable_kubernetes_exits_6(plain_cli: Cli, tmp_path: pathlib.Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "dead"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    result = plain_cli("kv", "get", "s", "k", "-n", "default", "--kubeconfig", str(kubeconfig), "--timeout", "2")
    assert result.returncode == exits.UNAVAILABLE, result.stderr
    assert "kubecoord kv:" in result.stderr and result.stderr.count("\n") == 1


def test_missing_kubeconfig_is_a_usage_error(plain_cli: Cli, tmp_path: pathlib.Path) -> None:
    result = plain_cli("leader", "x", "-n", "default", "--kubeconfig", str(tmp_path / "absent"))
    assert result.returncode == exits.USAGE and "cannot load kubeconfig" in result.stderr


def test_a_kubeconfig_that_is_not_yaml_is_a_usage_error(plain_cli: Cli, tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nclusters: [\n")
    result = plain_cli("leader", "x", "-n", "default", "--kubeconfig", str(kubeconfig))
    assert result.returncode == exits.USAGE and "cannot load kubeconfig" in result.stderr, result.stderr


def test_permission_denied_exits_7(
    api_emulator: ApiEmulator, plain_cli: Cli, namespace: str, tmp_path: pathlib.Path
) -> None:
    token = api_emulator.token_for_service_account(namespace, "nobody")
    kubeconfig = api_emulator.write_kubeconfig(tmp_path / "nobody", namespace=namespace, token=token)
    result = plain_cli("kv", "get", "s", "k", "--kubeconfig", str(kubeconfig))
    assert result.returncode == exits.DENIED, result.stderr
    assert "not allowed" in result.stderr


def test_zookeeper_url_from_the_environment(zk_cli: Cli, zk_url: str) -> None:
    assert zk_cli("kv", "put", "conf", "a/b", "1").returncode == 0
    with kubecoord.connect(zk_url) as coord:
        assert coord.storage("conf").fetch("a/b").result(10) == "1"
        assert coord.leader_election("svc").nominate("zk-a", data="d")
        assert zk_cli.json("leader", "svc")["leader"] == "zk-a"
        coord.group_membership("g").join("m", data="x")
        assert zk_cli.json("members", "g")["members"] == [{"id": "m", "data": "x"}]
    assert json.loads(zk_cli("kv", "ls", "conf", "-r", "-o", "json").stdout)["keys"] == [
        {"key": "a/b", "value": "1", "version": 1}
    ]
