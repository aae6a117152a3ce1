"""The chart's CRDs are crds/ — the single source — rendered through templates."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import yaml

from tests.chart.conftest import ROOT, Render, by_kind


def sources() -> dict[str, dict[str, Any]]:
    crds = [yaml.safe_load(path.read_text()) for path in sorted((ROOT / "crds").glob("*.yaml"))]
    return {crd["metadata"]["name"]: crd for crd in crds}


def test_rendered_crds_equal_the_source(render: Render) -> None:
    rendered = {crd["metadata"]["name"]: crd for crd in by_kind(render(), "CustomResourceDefinition")}
    expected = sources()
    assert set(rendered) == set(expected) and expected
    for name, source in expected.items():
        chart = rendered[name]
        assert (chart["apiVersion"], chart["kind"]) == (source["apiVersion"], source["kind"])
        assert chart["spec"] == source["spec"], f"{name}: spec differs from crds/ (run `make chart-crds`)"
        labels = source["metadata"].get("labels") or {}
        assert labels.items() <= chart["metadata"]["labels"].items()


def test_generated_templates_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "charts/scripts/generate_crds.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
