"""The chart's README states the defaults of values.yaml: each row of its values table
names a key that exists and the default it has, and every top-level section is there."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.chart.conftest import CHART

ROW = re.compile(r"^\| `(?P<key>[A-Za-z0-9_.]+)` \| `(?P<default>[^`]*)` \|")


def _rows() -> dict[str, str]:
    rows = {}
    for line in (CHART / "README.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            assert match["key"] not in rows, f"{match['key']} twice in the table"
            rows[match["key"]] = match["default"]
    return rows


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        assert isinstance(node, dict) and part in node, f"README names {dotted}, which values.yaml does not have"
        node = node[part]
    return node


def test_every_default_in_the_readme_is_the_one_in_values_yaml() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = _rows()
    assert len(rows) > 20
    wrong = {key: (default, _lookup(values, key)) for key, default in rows.items()
             if yaml.safe_load(default or '""') != _lookup(values, key)}
    assert not wrong, wrong


def test_the_readme_covers_every_section_users_set() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    covered = {key.split(".")[0] for key in _rows()}
    # Sections passed through to Kubernetes as they are (documented in values.yaml only).
    passthrough = {"nameOverride", "fullnameOverride", "serviceAccount", "podSecurityContext", "securityContext",
                   "podAnnotations", "podLabels", "priorityClassName", "nodeSelector", "tolerations", "affinity"}
    assert set(values) - passthrough <= covered, set(values) - passthrough - covered
