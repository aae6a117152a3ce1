"""The CRDs in crds/: structure, printer columns, CEL rules that compile, and examples that
satisfy the schemas. Admission itself (422 Invalid with field paths) is tested against the
API emulator; here we check the source files the chart and the emulator consume.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml
from celpy.adapter import json_to_cel

ROOT = Path(__file__).resolve().parents[2]
CRDS = {path.name: yaml.safe_load(path.read_text()) for path in sorted((ROOT / "crds").glob("*.yaml"))}
EXAMPLES = [
    doc
    for path in sorted((ROOT / "examples").rglob("*.yaml"))
    if "invalid" not in path.parts
    for doc in yaml.safe_load_all(path.read_text())
    if doc and doc["apiVersion"] == "kubecoord.dev/v1alpha1"
]
KINDS = {"LeaderElection": "leaderelections", "Group": "groups", "KVStore": "kvstores"}


def _schema(kind: str) -> dict[str, Any]:
    crd = CRDS[f"{KINDS[kind]}.kubecoord.dev.yaml"]
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _rules(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, rule) for rule in schema.get("x-kubernetes-validations", [])]
    for name, child in schema.get("properties", {}).items():
        found += _rules(child, f"{path}.{name}")
    if "items" in schema:
        found += _rules(schema["items"], f"{path}[]")
    return found


def _defaulted(schema: dict[str, Any], value: Any) -> Any:
    """Apply the schema's defaults the way the API server does before validation."""
    if not isinstance(value, dict):
        return value
    result = dict(value)
    for name, child in schema.get("properties", {}).items():
        if name not in result and "default" in child:
            result[name] = child["default"]
        if name in result:
            result[name] = _defaulted(child, result[name])
    return result


def _evaluate(rule: str, self_value: Any) -> bool:
    env = celpy.Environment()
    return bool(env.program(env.compile(rule)).evaluate({"self": json_to_cel(self_value)}))


def test_three_namespaced_kinds_in_one_group_with_status_and_columns() -> None:
    assert set(CRDS) == {f"{plural}.kubecoord.dev.yaml" for plural in KINDS.values()}
    columns = {
        "LeaderElection": ["Leader", "Epoch"], "Group": ["Members", "Generation", "Phase"], "KVStore": ["Keys", "Size"]
    }
    # READY is a default column (not only -o wide): the first thing a user checks.
    for kind, plural in KINDS.items():
        crd = CRDS[f"{plural}.kubecoord.dev.yaml"]
        assert crd["spec"]["group"] == "kubecoord.dev" and crd["spec"]["scope"] == "Namespaced"
        assert crd["spec"]["names"]["kind"] == kind and crd["spec"]["names"]["shortNames"]
        (version,) = crd["spec"]["versions"]
        assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
        names = [column["name"] for column in version["additionalPrinterColumns"] if not column.get("priority")]
        assert names == [*columns[kind], "Ready", "Age"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_spec_field_is_typed_and_every_rule_compiles(kind: str) -> None:
    spec = _schema(kind)["properties"]["spec"]
    for name, field in spec["properties"].items():
        assert "type" in field and "description" in field, name
    env = celpy.Environment()
    for _, rule in _rules(_schema(kind)):
        env.compile(rule["rule"])
        assert rule["message"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda doc: f"{doc['kind']}/{doc['metadata']['name']}")
def test_examples_satisfy_schema_and_rules(example: dict[str, Any]) -> None:
    schema = _schema(example["kind"])
    document = _defaulted(schema, example)
    jsonschema.Draft4Validator(schema).validate(document)
    for path, rule in _rules(schema):
        if "oldSelf" in rule["rule"]:
            continue  # transition rules need an old object
        target: Any = document
        for part in path.strip(".").split(".") if path else []:
            target = target.get(part) if isinstance(target, dict) else None
        if target is None:
            continue  # the API server evaluates a field's rules only when the field is set
        assert _evaluate(rule["rule"], target), (path, rule["message"])


def test_cross_field_rules_reject_what_they_name() -> None:
    spec = _schema("LeaderElection")["properties"]["spec"]
    messages = {rule["fieldPath"]: rule for rule in spec["x-kubernetes-validations"] if "renewDeadline" in rule["rule"]}
    assert messages
    base = _defaulted(spec, {"leaseDurationSeconds": 5, "renewDeadlineSeconds": 8})
    broken = [rule["message"] for rule in spec["x-kubernetes-validations"] if not _evaluate(rule["rule"], base)]
    assert len(broken) == 1 and broken[0].startswith("renewDeadlineSeconds must be less than leaseDurationSeconds")
    zk_without_hosts = _defaulted(spec, {"backend": "zookeeper"})
    assert not _evaluate(spec["x-kubernetes-validations"][0]["rule"], zk_without_hosts)
    jitter = _defaulted(spec, {"leaseDurationSeconds": 15, "renewDeadlineSeconds": 2.4, "retryPeriodSeconds": 2})
    assert not _evaluate(spec["x-kubernetes-validations"][2]["rule"], jitter)


def test_group_assignment_rules_reject_what_they_name() -> None:
    spec = _schema("Group")["properties"]["spec"]
    assignment = spec["properties"]["assignment"]
    rules = [r for r in assignment["x-kubernetes-validations"] if "oldSelf" not in r["rule"]]

    def broken(value: dict[str, Any]) -> list[str]:
        document = _defaulted(assignment, value)
        return [r["message"] for r in rules if not _evaluate(r["rule"], document)]

    assert broken({"units": 64}) == []
    assert broken({"unitNames": ["a", "b"]}) == []
    assert broken({"units": 4, "unitNames": ["a"]}) == [rules[0]["message"]]
    assert broken({}) == [rules[0]["message"]]
    assert broken({"units": 4, "sessionTimeoutSeconds": 20, "rebalanceTimeoutSeconds": 10}) == [rules[1]["message"]]
    # Either backend: the operator assigns zookeeper-backed groups too.
    group = {"backend": "zookeeper", "zookeeper": {"hosts": ["zk:2181"]}, "renewIntervalSeconds": 5,
             "leaseDurationSeconds": 15, "assignment": {"units": 1}}
    assert [r["message"] for r in spec["x-kubernetes-validations"]
            if "oldSelf" not in r["rule"] and not _evaluate(r["rule"], group)] == []
