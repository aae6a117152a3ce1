"""The command as kubectl and etcdctl users type it: ``get KIND NAME`` and ``leader get NAME``
spellings run the command they name, ``-o name`` prints KIND/NAME, ``-o wide`` adds
columns, ``-o jsonpath=`` is kubectl's, ``kv list`` is ``kv ls``; and the exit statuses do
not move: ``lock --wait`` that gives up says so (5), ``lock --status`` of a lock nobody
ever held is not found (4) as ``leader`` of an unknown election is, and ``--log-level
DEBUG`` adds a traceback but never changes an exit status."""

from __future__ import annotations

import json
import pathlib
import socket
from collections.abc import Iterator

import pytest
import yaml

import kubecoord
from kubecoord.cli import KUBECOORD, habits
from tests.cli.conftest import FAST, Cli
from tests.helpers import eventually


@pytest.fixture(scope="module")
def arranged(declared: tuple[Cli, pathlib.Path]) -> Iterator[tuple[Cli, pathlib.Path]]:
    """``declared`` with a leader of batch (a plain Lease), a member of workers and a key of topics."""
    cli, path = declared
    coord = kubecoord.connect("kubernetes://apps", kubeconfig=str(path), **FAST)
    election = coord.leader_election("batch")  # no LeaderElection declares it: the backend makes its Lease
    election.nominate("pod-a", data="10.0.0.7")
    coord.group_membership("workers").join("w1", data="zone=a")
    storage = coord.storage("topics")
    if storage.fetch("orders/config").result(10) is None:
        storage.put("orders/config", "partitions=3")
    eventually(lambda: election.is_leader("pod-a"), timeout=30)
    yield cli, path
    coord.close()


@pytest.mark.parametrize(
    ("spelling", "command"),
    [
        (["get", "leaderelection", "batch"], ["leader", "batch"]),
        (["get", "le", "batch"], ["leader", "batch"]),
        (["get", "leaderelections", "batch"], ["leader", "batch"]),
        (["leader", "get", "batch"], ["leader", "batch"]),
        (["leader", "show", "batch"], ["leader", "batch"]),
        (["get", "group", "workers"], ["members", "workers"]),
        (["get", "kcg", "workers"], ["members", "workers"]),
        (["members", "list", "workers"], ["members", "workers"]),
        (["get", "kvstore", "topics"], ["kv", "ls", "topics"]),
        (["get", "kv", "topics", "orders"], ["kv", "ls", "topics", "orders"]),
        (["kv", "list", "topics"], ["kv", "ls", "topics"]),
        (["get", "lock", "batch"], ["lock", "batch", "--status"]),
        (["lock", "status", "batch"], ["lock", "batch", "--status"]),
    ],
)
def test_kubectl_and_etcdctl_spellings_run_the_command_they_name(
    arranged: tuple[Cli, pathlib.Path], spelling: list[str], command: list[str]
) -> None:
    cli, _ = arranged
    expected = cli(*command, "-o", "json")
    assert expected.returncode == 0, expected.stderr
    typed = cli(*spelling, "-o", "json")
    assert (typed.returncode, typed.stdout) == (0, expected.stdout), typed.stderr
    if spelling[0] == "kv":
        return  # kv's own actions, not a rewritten spelling: options come after the action
    # Options may come anywhere, as kubectl takes them.
    moved = cli(spelling[0], "-o", "json", "-n", "apps", *spelling[1:])
    assert (moved.returncode, moved.stdout) == (0, expected.stdout), moved.stderr


def test_get_kind_without_name_lists_that_kind_and_typos_are_usage_errors(arranged: tuple[Cli, pathlib.Path]) -> None:
    cli, _ = arranged
    listed = cli("get", "leaderelections", "-o", "name")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["leaderelection.kubecoord.dev/billing"]
    table = cli("get", "kvstores").stdout
    assert "topics" in table and "billing" not in table
    for args in (["get", "leaderelectoin", "billing"], ["get", "locks"], ["get"]):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
    assert "needs NAME" in cli("get", "locks").stderr
    # An election named like a verb is still an election: the verb is read as one only before a NAME.
    assert cli("leader", "get").returncode == 4


def test_output_name_is_kind_slash_name_and_wide_adds_columns(arranged: tuple[Cli, pathlib.Path]) -> None:
    cli, _ = arranged
    assert cli("leader", "batch", "-o", "name").stdout == "leaderelection/batch\n"
    assert cli("members", "workers", "-o", "name").stdout == "member/w1\n"
    assert cli("kv", "ls", "topics", "-r", "-o", "name").stdout == "key/orders/config\n"
    assert cli("kv", "get", "topics", "orders/config", "-o", "name").stdout == "key/orders/config\n"
    assert cli("lock", "batch", "--status", "-o", "name").stdout == "holder/pod-a\n"
    assert "leaderelection.kubecoord.dev/billing" in cli("status", "-o", "name").stdout.splitlines()

    def headers(*args: str) -> list[str]:
        result = cli(*args)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()[0].split()

    assert headers("kv", "ls", "topics", "-r") == ["KEY", "VERSION", "VALUE"]
    assert headers("kv", "ls", "topics", "-r", "-o", "wide") == ["KEY", "VERSION", "SIZE", "VALUE"]
    assert cli("kv", "get", "topics", "orders/config", "-o", "wide").stdout.splitlines()[1].split()[2] == "12"
    assert headers("lock", "batch", "--status", "-o", "wide") == ["HOLDER", "TOKEN", "SLOT", "DATA"]
    assert headers("status", "-o", "wide") == ["KIND", "NAME", "BACKEND", "LEADER", "EPOCH", "MEMBERS", "KEYS",
                                               "HEALTH", "GENERATION", "SIZE", "OBSERVED", "AGE"]


def test_output_jsonpath_is_kubectls(arranged: tuple[Cli, pathlib.Path]) -> None:
    cli, _ = arranged
    assert cli("leader", "batch", "-o", "jsonpath={.leader}").stdout == "pod-a"
    assert cli("leader", "batch", "-o=jsonpath={.leader} {.data}").stdout == "pod-a 10.0.0.7"
    assert cli("members", "workers", "-o", 'jsonpath={range .members[*]}{.id}={.data}{"\\n"}{end}').stdout \
        == "w1=zone=a\n"
    assert cli("kv", "ls", "topics", "-r", "-o", 'jsonpath={.keys[?(@.key=="orders/config")].version}').stdout == "1"
    status = cli("status", "-o", "jsonpath={.resources[?(@.kind==\"KVStore\")].name}")
    assert status.returncode == 0 and status.stdout == "topics", status.stderr


def test_a_malformed_jsonpath_is_exit_2_before_any_request(plain_cli: Cli, tmp_path: pathlib.Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = _kubeconfig(tmp_path, f"https://127.0.0.1:{port}")
    for template in ("{.leader", "{range .members[*]}{.id}", "{.members[?(@.id=)]}", "{end}"):
        result = plain_cli("leader", "batch", "-o", f"jsonpath={template}", "--kubeconfig", str(kubeconfig))
        assert result.returncode == 2, (template, result.stderr)
        assert "jsonpath" in result.stderr or "-o" in result.stderr, result.stderr


def test_lock_status_of_a_lock_never_held_is_not_found_as_leader_is(arranged: tuple[Cli, pathlib.Path]) -> None:
    cli, _ = arranged
    leader = cli("leader", "never-held")
    lock = cli("lock", "never-held", "--status")
    assert leader.returncode == lock.returncode == 4, (leader.stderr, lock.stderr)
    assert "'never-held'" in lock.stderr
    held = cli("lock", "batch", "--status", "-o", "json")
    assert held.returncode == 0 and json.loads(held.stdout)["holders"][0]["id"] == "pod-a"


def test_lock_wait_that_gives_up_says_so(arranged: tuple[Cli, pathlib.Path]) -> None:
    cli, path = arranged
    with kubecoord.connect("kubernetes://apps", kubeconfig=str(path), **FAST) as coord:
        lock = coord.lock("nightly", id="holder-1")
        assert lock.acquire(timeout=30)
        result = cli("lock", "nightly", "--wait", "1", "--", "sh", "-c", "echo ran")
        lock.release()
    assert result.returncode == 5, result.stderr
    assert "ran" not in result.stdout
    assert "not acquired within --wait 1 s" in result.stderr and "holder-1" in result.stderr, result.stderr


def test_log_level_debug_never_changes_an_exit_status(
    arranged: tuple[Cli, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    cli, _ = arranged
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = str(_kubeconfig(tmp_path, f"https://127.0.0.1:{port}"))
    cases = {
        ("leader", "nobody-declared"): 4,
        ("kv", "get", "topics", "no/such/key"): 4,
        ("kv", "put", "topics", "orders/config", "again"): 5,
        ("leader", "Bad Name"): 2,
        ("get", "lock", "never-held"): 4,
        ("leader", "batch", "--kubeconfig", unreachable, "--timeout", "2"): 6,
        ("kv", "put", "topics", "k", "v", "--kubeconfig", unreachable, "--timeout", "2"): 6,
    }
    for args, status in cases.items():
        plain = cli(*args)
        debug = cli("--log-level", "DEBUG", *args)
        assert plain.returncode == status, (args, plain.stderr)
        assert debug.returncode == status, (args, debug.stderr[-2000:])
        command = "lock" if args[0] == "get" else args[0]
        assert f"kubecoord {command}: " in debug.stderr.splitlines()[-1], (args, debug.stderr[-2000:])


def test_the_rewritten_subcommands_are_the_ones_the_command_line_hands_over() -> None:
    assert KUBECOORD.rewrites is not None
    assert KUBECOORD.rewrites == ("kubecoord.cli.habits", habits.REWRITTEN)


def _kubeconfig(tmp_path: pathlib.Path, server: str) -> pathlib.Path:
    path = tmp_path / "unreachable-kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "apps"}}],
    }))
    return path
