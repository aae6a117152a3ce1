"""docs/reference/crds.md is generated from crds/ (charts/scripts/generate_crd_reference.py,
run by `make docs`): the committed page is up to date, and names every field, default, enum
value and validation message of every CRD."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "charts" / "scripts" / "generate_crd_reference.py"
PAGE = ROOT / "docs" / "reference" / "crds.md"


def test_the_committed_page_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def _walk(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, child in (schema.get("properties") or {}).items():
        if path or name not in {"apiVersion", "kind", "metadata"}:
            yield from _walk(child, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{path}[]")


def test_every_field_default_enum_and_message_is_on_the_page() -> None:
    page = PAGE.read_text()
    missing = []
    for source in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(source.read_text())
        assert f"## {crd['spec']['names']['kind']}" in page
        for version in crd["spec"]["versions"]:
            for path, schema in _walk(version["schema"]["openAPIV3Schema"], ""):
                wanted = [f"`{path}`"] if path and not path.endswith("[]") else []
                wanted += [" ".join(rule["message"].split()) for rule in schema.get("x-kubernetes-validations", [])]
                wanted += [f"`{value}`" for value in schema.get("enum", [])]
                wanted += [f"`{schema['default']}`"] if isinstance(schema.get("default"), (str, int, float)) else []
                missing += [f"{source.name} {path}: {text}" for text in wanted if text not in page]
    assert not missing, missing
