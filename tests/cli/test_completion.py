"""``kubecoord completion bash|zsh``: the printed script, sourced into a real bash,
completes subcommands, actions, options and option choices as the parser has them."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from kubecoord.cli import KUBECOORD
from kubecoord.cli.completion import tree

BASH = shutil.which("bash")


def _script(shell: str) -> str:
    result = subprocess.run([sys.executable, "-m", "kubecoord.cli", "completion", shell], capture_output=True,
                            text=True, check=True, timeout=120)
    return result.stdout


@pytest.fixture(scope="module")
def bash_script() -> str:
    return _script("bash")


def _complete(script: str, line: str) -> list[str]:
    """What bash offers for ``line`` (the cursor at its end), through the script's function."""
    if BASH is None:
        pytest.skip("no bash on this machine")
    words = line.split(" ")
    probe = (script + "\nCOMP_WORDS=(" + " ".join(f"'{w}'" for w in words) + f")\nCOMP_CWORD={len(words) - 1}\n"
             + "_kubecoord\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    result = subprocess.run([BASH, "--norc", "--noprofile", "-c", probe], capture_output=True, text=True,
                            check=True, timeout=60)
    return sorted(filter(None, result.stdout.splitlines()))


@pytest.mark.parametrize(("line", "expected"), [
    ("kubecoord ", sorted([*KUBECOORD.subcommands, "--help", "--log-format", "--log-level", "--version", "-h"])),
    ("kubecoord le", ["leader"]),
    ("kubecoord kv ", ["--help", "-h", "delete", "get", "list", "ls", "put", "update"]),
    ("kubecoord kv get topics key -o ", ["json", "jsonpath=", "name", "table", "value", "wide", "yaml"]),
    ("kubecoord kv ls topics --rec", ["--recursive"]),
    ("kubecoord --log-format ", ["json", "text"]),
    ("kubecoord watch members g --int", ["--interval"]),
    ("kubecoord leader x --url ", []),  # a free value: the shell's file names (-o default)
    ("kubecoord elect e -n ns -- ./run --ver", []),  # the command after -- is the shell's
])
def test_bash_completes_what_the_parser_accepts(bash_script: str, line: str, expected: list[str]) -> None:
    assert _complete(bash_script, line) == expected


def test_every_option_of_every_subcommand_is_offered(bash_script: str) -> None:
    """Generated, not written by hand: a new option shows up in the script by itself."""
    paths = tree(KUBECOORD.build_parser(None, load_all=True))
    assert set(paths) >= {"", "kv get", "kv ls", "watch kv", "group describe", "status", "completion"}
    for path, (subcommands, options, _values) in paths.items():
        offered = _complete(bash_script, " ".join(["kubecoord", *path.split(), ""]).replace("  ", " "))
        assert set(offered) == set(subcommands + options), path


def test_zsh_script_goes_through_bashcompinit() -> None:
    script = _script("zsh")
    assert script.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert script.rstrip().endswith("complete -o default -F _kubecoord kubecoord")
    zsh = shutil.which("zsh")
    if zsh is not None:  # not on these machines (Debian without zsh): the text checks above stand
        subprocess.run([zsh, "-f", "-c", script], check=True, timeout=60)
