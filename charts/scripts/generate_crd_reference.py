"""Generate docs/reference/crds.md, the reference of the custom resources, from crds/.

crds/*.yaml is the single source of the CRDs; this script writes every field of each
served version's schema into one page: its path, type, default, whether it is required,
its constraints (enum, bounds, lengths, pattern, format, list type) and description, then
every CEL validation rule (x-kubernetes-validations) with the message the API server
answers when the rule fails, and the columns `kubectl get` prints.

Usage: python charts/scripts/generate_crd_reference.py [--check]
  --check  write nothing; exit 1 if the page is missing or stale

`make docs` writes the page before it builds the site; tests/docs/test_crd_reference.py
checks that the committed page is up to date.
"""

from __future__ import annotations

import html
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "crds"
TARGET = ROOT / "docs" / "reference" / "crds.md"
SKIPPED = {"apiVersion", "kind", "metadata"}
"""Top-level properties every Kubernetes object has: the API conventions document them."""

HEADER = """\
<!-- GENERATED from crds/*.yaml by charts/scripts/generate_crd_reference.py (`make docs`):
edit the CRDs, not this page. tests/docs/test_crd_reference.py checks it is up to date. -->
# Custom resources

The operator serves three custom resources in the API group `kubecoord.dev`. This page is
generated from the CustomResourceDefinitions in `crds/` (the chart's copies are generated
from the same files): every field with its type, default and constraints, and every
validation rule with the message the API server answers when a request breaks it. The API
server enforces all of them at admission, before the operator sees the object; a refused
`kubectl apply` prints the message. The operator's behaviour for each resource is in
[the operator](../operator.md).
"""


class Field(NamedTuple):
    path: str
    schema: dict[str, Any]
    required: bool


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell: pipes escaped, newlines folded."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(value: object) -> str:
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    if text.endswith("\n...") or text.endswith(" ..."):
        text = text.rsplit("...", 1)[0].strip()
    text = " ".join(text.split())
    if "|" in text:  # a table cell's code span would keep the backslash of an escaped pipe;
        # in raw HTML, Markdown still reads brackets as links and backslashes as escapes
        entities = {"|": "&#124;", "[": "&#91;", "]": "&#93;", "\\": "&#92;", "*": "&#42;", "_": "&#95;"}
        return "<code>" + "".join(entities.get(c, c) for c in html.escape(text)) + "</code>"
    return f"`{text}`"


def _fields(schema: dict[str, Any], prefix: str, required: bool) -> Iterator[Field]:
    """Every property under ``schema``, depth first, in the CRD's order; array items as ``path[]``."""
    needed = set(schema.get("required", []))
    for name, child in (schema.get("properties") or {}).items():
        if not prefix and name in SKIPPED:
            continue
        path = f"{prefix}.{name}" if prefix else name
        yield Field(path, child, name in needed)
        yield from _children(child, path)


def _children(schema: dict[str, Any], path: str) -> Iterator[Field]:
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        items = schema["items"]
        if items.get("type") == "object":
            yield from _fields(items, f"{path}[]", True)
        else:
            yield from _children(items, f"{path}[]")
    elif schema.get("type") == "object":
        yield from _fields(schema, path, True)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            yield Field(f"{path}.*", extra, False)
            yield from _children(extra, f"{path}.*")


def _type(schema: dict[str, Any]) -> str:
    kind = str(schema.get("type", "any"))
    if kind == "array" and isinstance(schema.get("items"), dict):
        kind = f"array of {_type(schema['items'])}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        kind = f"map of {_type(schema['additionalProperties'])}"
    if schema.get("format"):
        kind += f" ({schema['format']})"
    return kind


CONSTRAINTS = (
    ("minimum", "≥ {}", ""),
    ("exclusiveMinimum", "> {}", ""),
    ("maximum", "≤ {}", ""),
    ("exclusiveMaximum", "< {}", ""),
    ("minLength", "at least {}", "character"),
    ("maxLength", "at most {}", "character"),
    ("minItems", "at least {}", "item"),
    ("maxItems", "at most {}", "item"),
    ("minProperties", "at least {}", "entry"),
    ("maxProperties", "at most {}", "entry"),
)


def _bound(template: str, value: object, unit: str) -> str:
    if not unit:
        return template.format(value)
    plural = unit if value == 1 else ("entries" if unit == "entry" else unit + "s")
    return f"{template.format(value)} {plural}"


def _constraints(schema: dict[str, Any], required: bool, messages: list[str]) -> list[str]:
    """What a value must be: the schema's own constraints, then the messages of the CEL rules
    whose target (the rule's object and fieldPath) is this field."""
    found = ["required"] if required else []
    if "enum" in schema:
        found.append("one of " + ", ".join(_code(value) for value in schema["enum"]))
    found += [_bound(template, schema[key], unit) for key, template, unit in CONSTRAINTS if key in schema]
    if "pattern" in schema:
        found.append(f"matches {_code(schema['pattern'])}")
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        items = schema["items"]
        found += [f"each item {text}" for text in _constraints(items, False, [])]
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        found.append("no duplicates")
    elif list_type == "map":
        found.append("one item per " + ", ".join(_code(key) for key in schema.get("x-kubernetes-list-map-keys", [])))
    return found + [_cell(message) for message in messages]


class Rule(NamedTuple):
    target: str
    """The field a failure is reported on: the rule's object, plus its fieldPath."""
    message: str
    text: str


def _rules(schema: dict[str, Any], path: str) -> Iterator[Rule]:
    for rule in schema.get("x-kubernetes-validations", []):
        target = path + rule.get("fieldPath", "") if path else rule.get("fieldPath", "").lstrip(".")
        message = " ".join((rule.get("message") or rule.get("messageExpression") or "(no message)").split())
        reason = f" (reason `{rule['reason']}`)" if rule.get("reason") else ""
        where = f"`{target}`" if target else "the object"
        yield Rule(target, message, f"- **{where}**: {message}{reason}. Rule: `{rule['rule']}`")


def _listed(label: str, values: list[str]) -> str:
    return label + ", ".join(f"`{value}`" for value in values) if values else ""


def _version(crd: dict[str, Any], version: dict[str, Any]) -> list[str]:
    spec, names = crd["spec"], crd["spec"]["names"]
    schema = version["schema"]["openAPIV3Schema"]
    lines = [
        f"## {names['kind']}",
        "",
        f"`{spec['group']}/{version['name']}`, {spec['scope'].lower()}; plural `{names['plural']}`"
        + _listed(", short names ", names.get("shortNames", []))
        + _listed(", categories ", names.get("categories", []))
        + (", status subresource" if "status" in version.get("subresources", {}) else "")
        + ".",
        "",
        " ".join(schema.get("description", "").split()),
        "",
    ]
    columns = version.get("additionalPrinterColumns", [])
    if columns:
        lines += ["### kubectl get columns", "", "| column | type | value | shown | description |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {c['name']} | {c['type']} | {_code(c['jsonPath'])} | "
                  f"{'with -o wide' if c.get('priority', 0) else 'always'} | {_cell(c.get('description', ''))} |"
                  for c in columns]
        lines.append("")
    fields = list(_fields(schema, "", False))
    rules = [*_rules(schema, "")]
    for field in fields:
        rules += _rules(field.schema, field.path)
    lines += ["### Fields", "", "| field | type | default | constraints | description |",
              "| --- | --- | --- | --- | --- |"]
    for field in fields:
        default = _code(field.schema["default"]) if "default" in field.schema else ""
        messages = [rule.message for rule in rules if rule.target == field.path]
        constraints = "; ".join(_constraints(field.schema, field.required, messages))
        lines.append(f"| `{field.path}` | {_type(field.schema)} | {default} | {constraints} | "
                     f"{_cell(field.schema.get('description', ''))} |")
    if rules:
        lines += ["", "### Validation rules", "",
                  "CEL rules (`x-kubernetes-validations`) the API server evaluates on every create and "
                  "update, by the field a failure names; the message is what a refused request answers.",
                  "", *(rule.text for rule in rules)]
    return [*lines, ""]


def render(sources: list[Path]) -> str:
    parts = [HEADER]
    for source in sources:
        crd = yaml.safe_load(source.read_text(encoding="utf-8"))
        if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
            raise SystemExit(f"{source}: not a CustomResourceDefinition")
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                parts.append("\n".join(_version(crd, version)))
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    sources = sorted(SOURCE.glob("*.yaml"), key=lambda path: path.name)
    if not sources:
        raise SystemExit(f"no CRDs in {SOURCE}")
    text = render(sources)
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else None
    if current == text:
        return 0
    if "--check" in argv[1:]:
        print(f"{TARGET.relative_to(ROOT)} is {'stale' if current else 'missing'}: run `make docs`", file=sys.stderr)
        return 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
