"""Every backend kubecoord's distribution declares is named wherever a user first meets the
list: ``kubecoord --help``, the ``--url`` help, the refusal of memory:// by a command, the
package description, README.md and docs/index.md. The declared backends are the entry points
of pyproject.toml (group kubecoord.backends), so a backend added there fails this test until
kubecoord.connect.URL_FORMS (the one list the help texts are written from) and the pages
name it."""

from __future__ import annotations

import argparse
import contextlib
import io
import pathlib
import re
import tomllib

import pytest

from kubecoord.cli import connection, main
from kubecoord.cli.exits import UsageError
from kubecoord.connect import BUILTIN_SCHEMES, URL_FORMS

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DECLARED = sorted(PYPROJECT["project"]["entry-points"]["kubecoord.backends"])
NAMES = {"memory": "memory", "kubernetes": "Kubernetes", "zookeeper": "ZooKeeper", "cassandra": "Cassandra",
         "etcd": "etcd"}
"""How prose names each scheme's service; a new backend adds its name here."""


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(argv)
    return " ".join(out.getvalue().split())


def test_the_declared_backends_are_the_url_forms() -> None:
    assert DECLARED == sorted(URL_FORMS) == sorted(BUILTIN_SCHEMES), (
        "every entry point of pyproject.toml's kubecoord.backends needs its URL form in "
        "kubecoord.connect.URL_FORMS (the help texts are written from it) and a prose name in NAMES here")
    for scheme, form in URL_FORMS.items():
        assert form.startswith(f"{scheme}://")


@pytest.mark.parametrize("scheme", DECLARED)
def test_the_help_texts_name_every_backend(scheme: str) -> None:
    top, url = _help(["--help"]), _help(["leader", "--help"])
    if scheme == "memory":  # in-process: named as the one a command cannot reach
        assert "memory:// lives inside one process" in top and "memory:// lives inside one process" in url
    else:
        assert URL_FORMS[scheme] in top and URL_FORMS[scheme] in url
    # The opening sentence names every service by its prose name, not only the URL list.
    assert NAMES[scheme] in top.split("Connection:")[0]


def test_memory_is_refused_naming_what_a_command_can_reach() -> None:
    args = argparse.Namespace(url="memory://", namespace=None, kubeconfig=None, context=None)
    with pytest.raises(UsageError) as refused:
        connection.resolve_url(args)
    for scheme in DECLARED:
        if scheme != "memory":
            assert URL_FORMS[scheme] in str(refused.value)


@pytest.mark.parametrize("page", ["pyproject.toml", "README.md", "docs/index.md"])
def test_the_package_description_names_every_backend(page: str) -> None:
    if page == "pyproject.toml":
        text = PYPROJECT["project"]["description"]
    else:  # the opening paragraph, the package description of the page
        text = (ROOT / page).read_text().split("\n\n")[1]
    missing = [scheme for scheme in DECLARED if not re.search(rf"\b{NAMES[scheme]}\b", text, re.I)]
    assert not missing, f"{page} does not name {missing} in its description: {text!r}"
