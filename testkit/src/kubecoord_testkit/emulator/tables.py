"""Server-side printing: ``Table`` responses for clients that ask for them (kubectl get).

A request whose Accept header asks for ``as=Table`` (meta.k8s.io v1 or v1beta1) gets the
rows as the API server renders them: Name, then a CRD's ``additionalPrinterColumns`` of
the served version, then Age; ``date`` columns render as human durations (``5m``, ``3h``).
Built-in kinds get Name and Age only (the real server prints more columns for some).

A column's JSONPath is read as the API server reads printer columns: fields
(``.status.leader``), indices (``[0]``, ``[-1]``), ``[*]`` and filters on a field
(``[?(@.type=="Ready")]``, with ``==`` or ``!=`` against a quoted string, a number or
true/false); the cell is the first value found (testkit/tests/emulator/test_tables.py compares the
cells with the real kube-apiserver's for the kubecoord CRDs).
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from kubecoord_testkit.emulator.resources import ResourceType

JSON = dict[str, Any]
_STEP = re.compile(r"""\[\?\(@\.([^=!()\s]+)\s*(==|!=)\s*("[^"]*"|'[^']*'|[^)\s]+)\s*\)\]|([^.\[\]]+)|\[(-?\d+|\*)\]""")


def wants_table(accept: str | None) -> bool:
    return bool(accept) and "as=Table" in (accept or "")


def human_duration(since: str | None) -> str:
    """The API server's duration.HumanDuration, to the precision kubectl shows."""
    if not since:
        return "<unknown>"
    try:
        then = datetime.datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return "<invalid>"
    seconds = int((datetime.datetime.now(datetime.UTC) - then).total_seconds())
    if seconds < 0:
        return "<invalid>"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def json_path(obj: Any, path: str) -> Any:
    """A printer column's JSONPath (``.a.b[0].c``, ``{.a.b}``, ``.a[?(@.b=="x")].c``): the
    first value it finds, None when there is none."""
    nodes = [obj]
    for field, operator, literal, name, index in _STEP.findall(path.strip().strip("{}").lstrip(".")):
        if field:
            wanted = _literal(literal)
            nodes = [item for node in nodes if isinstance(node, list) for item in node
                     if (json_path(item, field) == wanted) == (operator == "==")]
        elif name:
            nodes = [node[name] for node in nodes if isinstance(node, dict) and name in node]
        elif index == "*":
            nodes = [item for node in nodes if isinstance(node, list) for item in node]
        else:
            at = int(index)
            nodes = [node[at] for node in nodes if isinstance(node, list) and -len(node) <= at < len(node)]
        if not nodes:
            return None
    return nodes[0]


def _literal(text: str) -> Any:
    if text[:1] in "\"'":
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def _cell(value: Any, column_type: str) -> Any:
    if value is None:
        return None
    if column_type == "date":
        return human_duration(str(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def _columns(rtype: ResourceType, crd: JSON | None) -> list[JSON]:
    if crd is None:
        return []
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == rtype.version:
            return list(version.get("additionalPrinterColumns") or [])
    return []


def table(rtype: ResourceType, crd: JSON | None, objects: list[JSON], metadata: JSON) -> JSON:
    columns = _columns(rtype, crd)
    definitions = [
        {"name": "Name", "type": "string", "format": "name", "description": "Name of the object", "priority": 0}
    ]
    for column in columns:
        definitions.append(
            {
                "name": column.get("name", ""),
                "type": column.get("type", "string"),
                "format": column.get("format", ""),
                "description": column.get("description", ""),
                "priority": column.get("priority", 0),
            }
        )
    if not any(column.get("jsonPath") == ".metadata.creationTimestamp" for column in columns):
        definitions.append(
            {"name": "Age", "type": "string", "format": "", "description": "Time since creation", "priority": 0}
        )
        columns = [*columns, {"jsonPath": ".metadata.creationTimestamp", "type": "date"}]
    rows = []
    for obj in objects:
        meta = obj["metadata"]
        cells = [meta["name"]] + [_cell(json_path(obj, c.get("jsonPath", "")), c.get("type", "")) for c in columns]
        rows.append(
            {
                "cells": cells,
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta},
            }
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    }
