"""values.schema.json refuses unknown keys and bad values; values.yaml documents every key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.chart.conftest import CHART, run_helm


@pytest.mark.parametrize(
    ("setting", "complaint"),
    [
        ("replicas=3", "additional properties 'replicas' not allowed"),
        ("metrics.prot=9091", "additional properties 'prot' not allowed"),
        ("crds.upgrade=true", "additional properties 'upgrade' not allowed"),
        ("image.pullPolicy=Sometimes", "value must be one of"),
        ("replicaCount=0", "minimum"),
        ("operator.logLevel=chatty", "value must be one of"),
    ],
)
def test_schema_rejects(helm: Path, setting: str, complaint: str) -> None:
    result = run_helm(helm, "template", "kc", str(CHART), "--set", setting)
    assert result.returncode != 0
    assert complaint in result.stderr, result.stderr


def test_helm_lint_is_clean(helm: Path) -> None:
    for extra in ([], ["--set", "operator.allNamespaces=false", "--set", "crds.enabled=false"]):
        result = run_helm(helm, "lint", "--strict", str(CHART), *extra)
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_value_is_documented() -> None:
    """Each key of values.yaml has a comment right above it, except the fields inside
    Kubernetes objects passed through as they are (resources, security contexts)."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    ancestors: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("- "):
            continue
        indent = len(line) - len(line.lstrip())
        key = stripped.split(":", 1)[0]
        while ancestors and ancestors[-1][0] >= indent:
            ancestors.pop()
        passthrough = any(name in _PASSTHROUGH for _, name in ancestors)
        if not passthrough and not lines[i - 1].strip().startswith("#"):
            undocumented.append(key)
        ancestors.append((indent, key))
    assert not undocumented, undocumented


_PASSTHROUGH = {"resources", "podSecurityContext", "securityContext"}


def test_schema_knows_every_value() -> None:
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(node: dict[str, object], props: dict[str, object], path: str) -> None:
        for key, value in node.items():
            assert key in props, f"{path}{key} is missing from values.schema.json"
            sub = props[key]
            assert isinstance(sub, dict)
            if isinstance(value, dict) and sub.get("additionalProperties") is False:
                walk(value, sub["properties"], f"{path}{key}.")

    walk(values, schema["properties"], "")
