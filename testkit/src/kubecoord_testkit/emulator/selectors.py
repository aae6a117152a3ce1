"""Label and field selectors, parsed as the API server parses them.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``
(exists), ``!k`` (does not exist), comma-separated (AND). Field selectors: ``=``, ``==``,
``!=`` on ``metadata.name`` and ``metadata.namespace`` (every resource), on the fields a
built-in kind supports (``FIELDS_BY_RESOURCE``: Events' involvedObject, Pods' phase and
node, ...) and on a CRD version's ``selectableFields``; any other field answers 400.
Malformed selectors raise ``StatusError`` 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubecoord_testkit.emulator import status

JSON = dict[str, Any]
Predicate = Callable[[JSON], bool]

_KEY = r"[A-Za-z0-9./_-]+"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
FIELDS = ("metadata.name", "metadata.namespace")
_OBJECT_REFERENCE = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
FIELDS_BY_RESOURCE: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "events"): (
        *(f"involvedObject.{f}" for f in _OBJECT_REFERENCE),
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    ("events.k8s.io", "events"): (
        *(f"regarding.{f}" for f in _OBJECT_REFERENCE),
        "reason",
        "reportingController",
        "type",
    ),
    ("", "pods"): (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    ("", "secrets"): ("type",),
    ("", "namespaces"): ("status.phase",),
}


def _lookup(obj: JSON, path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return ""
    return str(node).lower() if isinstance(node, bool) else str(node)


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def _label_requirement(text: str) -> Predicate:
    if match := _SET.match(text):
        key, op, raw = match.groups()
        values = {value.strip() for value in raw.split(",") if value.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _EQ.match(text):
        key, op, value = match.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match := _EXISTS.match(text):
        negate, key = match.groups()
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise status.bad_request(f"unable to parse requirement: found '{text.strip()}', expected: identifier")


def label_selector(selector: str | None) -> Predicate:
    """A predicate over an object's labels; everything matches an empty selector."""
    requirements = [_label_requirement(part) for part in _split(selector or "")]

    def matches(obj: JSON) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(requirement(labels) for requirement in requirements)

    return matches


def field_selector(selector: str | None, extra_fields: tuple[str, ...] = ()) -> Predicate:
    requirements: list[Predicate] = []
    for part in _split(selector or ""):
        match = re.match(r"^\s*([A-Za-z0-9._-]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not match:
            raise status.bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        field_name, op, value = match.groups()
        if field_name not in FIELDS and field_name not in extra_fields:
            raise status.bad_request(f"field label not supported: {field_name}")

        def requirement(obj: JSON, path: str = field_name, op: str = op, value: str = value) -> bool:
            actual = _lookup(obj, path)
            return (actual != value) if op == "!=" else (actual == value)

        requirements.append(requirement)
    return lambda obj: all(requirement(obj) for requirement in requirements)


def combined(labels: str | None, fields: str | None, extra_fields: tuple[str, ...] = ()) -> Predicate:
    by_labels, by_fields = label_selector(labels), field_selector(fields, extra_fields)
    return lambda obj: by_labels(obj) and by_fields(obj)
