"""``-o jsonpath=``: kubectl's templates, judged by kubectl itself.

The same templates go to the real kubectl (``kubectl get -o jsonpath=``, against the API
emulator) and to kubecoord.cli.jsonpath over the JSON document kubectl read: the outputs
must be byte for byte the same. Malformed templates are refused as kubectl refuses them."""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from kubecoord.cli.jsonpath import TemplateError, compile_template
from kubecoord_testkit.emulator import ApiEmulator

CONFIGMAPS = [
    {"apiVersion": "v1", "kind": "ConfigMap",
     "metadata": {"name": name, "labels": {"app.kubernetes.io/name": name, "tier": tier}},
     "data": data}
    for name, tier, data in (("alpha", "web", {"a": "1", "b": "x y"}), ("beta", "db", {"a": "2"}),
                             ("gamma", "web", {"c": "3"}))
]

TEMPLATES = [
    "{.items[*].metadata.name}",
    "{.items[0].data.a}",
    "{.items[-1].metadata.name}",
    "{.items[0:2].metadata.name}",
    "{.items[0,2].metadata.name}",
    '{.items[?(@.metadata.labels.tier=="web")].metadata.name}',
    '{.items[?(@.data.a!="1")].metadata.name}',
    "{.items[?(@.data.c)].metadata.name}",
    "{..tier}",
    "{.items[0].metadata.labels.app\\.kubernetes\\.io/name}",
    "{.items[0].data['a','b']}",
    "{.items[0].data.*}",
    '{range .items[*]}{.metadata.name}{"\\t"}{.data.a}{"\\n"}{end}',
    "names: {.items[*].metadata.name} (end)",
    "{.items[0].data}",
    "{.items[1].metadata.labels}",
    "{.items[0].missing}",
    "{$.kind}",
    "{.items[?(@.metadata.name=='beta')].data.a}",
]
IN_MAP_ORDER = {"{.items[0].data.*}"}
"""Templates whose words kubectl prints in Go's map iteration order, which is not fixed from one
run to the next (kubecoord prints them by key): their words are compared as multisets."""


@pytest.fixture(scope="module")
def kubectl_on_emulator(kubectl: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """kubectl sends no bearer token over plain HTTP: an emulator that takes that as admin."""
    with ApiEmulator(host="127.0.0.1", port=0, anonymous_admin=True) as api:
        config = api.write_kubeconfig(tmp_path_factory.mktemp("jsonpath") / "kubeconfig")
        command = [str(kubectl), "--kubeconfig", str(config), "-n", "default"]
        for item in CONFIGMAPS:
            subprocess.run([*command, "apply", "--server-side", "--validate=false", "-f", "-"],
                           input=json.dumps(item), capture_output=True, text=True, timeout=60, check=True)
        yield command


def test_the_same_templates_print_what_kubectl_prints(kubectl_on_emulator: list[str]) -> None:
    listed = subprocess.run([*kubectl_on_emulator, "get", "configmaps", "-o", "json"], capture_output=True,
                            text=True, timeout=60, check=True)
    document = json.loads(listed.stdout)
    assert [item["metadata"]["name"] for item in document["items"]] == ["alpha", "beta", "gamma"]
    for template in TEMPLATES:
        theirs = subprocess.run([*kubectl_on_emulator, "get", "configmaps", "-o", f"jsonpath={template}"],
                                capture_output=True, text=True, timeout=60)
        assert theirs.returncode == 0, (template, theirs.stderr)
        ours = compile_template(template).render(document)
        if template in IN_MAP_ORDER:
            assert sorted(ours.split()) == sorted(theirs.stdout.split()), template
        else:
            assert ours == theirs.stdout, template


def _render(template: str, document: Any) -> str:
    return compile_template(template).render(document)


def test_values_print_as_kubectl_prints_them() -> None:
    document = {"leader": None, "epoch": 3, "held": True, "members": [{"id": "a"}], "data": "x"}
    assert _render("{.leader}", document) == ""
    assert _render("{.epoch}/{.held}", document) == "3/true"
    assert _render("{.members}", document) == '[{"id":"a"}]'
    assert _render("{.members[?(@.id=='a')].id}", document) == "a"
    assert _render("{.epoch}", {"epoch": 3}) == "3"
    assert _render('{.members[?(@.id>"0")].id}', document) == "a"
    assert _render("{.members[?(@.n<2)].id}", {"members": [{"id": "a", "n": 1}, {"id": "b", "n": 2}]}) == "a"
    assert _render("{.members[?(@.on==true)].id}", {"members": [{"id": "a", "on": True}, {"id": "b"}]}) == "a"


@pytest.mark.parametrize("template", ["{.leader", "{range .items[*]}{.id}", "{end}", "{}", "{.a[?(@.b=)]}",
                                      "{.a[x]}", "{.a[1:2:3:4]}", '{"unterminated}', "{.a[?@.b]}"])
def test_malformed_templates_are_refused(template: str) -> None:
    with pytest.raises(TemplateError):
        compile_template(template)
