"""Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and what the
emulator makes of strategic merge patch and server-side apply.

Differences from the API server (documented in docs/testing.md):
- strategic-merge-patch+json is applied as a JSON merge patch: lists are replaced whole,
  ``$patch``/``$retainKeys`` directives are not interpreted.
- apply-patch+yaml merges the applied configuration into the live object like a merge
  patch (or creates it); there are no managedFields and no field-ownership conflicts.
"""

from __future__ import annotations

import copy
from typing import Any

from kubecoord_testkit.emulator import status

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (MERGE, JSON_PATCH, STRATEGIC, APPLY)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _walk(doc: Any, path: str) -> tuple[Any, str | int]:
    """The container holding the last token of ``path`` and that token (RFC 6901)."""
    if not path.startswith("/"):
        raise status.unprocessable(f'invalid JSON pointer "{path}"')
    tokens = [_unescape(token) for token in path[1:].split("/")]
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token, path)
    last = tokens[-1]
    if isinstance(node, list):
        if last == "-":
            return node, len(node)
        if not last.isdigit():
            raise status.unprocessable(f'invalid array index "{last}" in "{path}"')
        return node, int(last)
    if not isinstance(node, dict):
        raise status.unprocessable(f'path "{path}" does not point into an object or array')
    return node, last


def _child(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict) and token in node:
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise status.unprocessable(f"doc is missing path: {path}: missing value")


def _get(doc: Any, path: str) -> Any:
    if path == "":
        return doc
    container, token = _walk(doc, path)
    try:
        return container[token]
    except (KeyError, IndexError):
        raise status.unprocessable(f"doc is missing path: {path}: missing value") from None


def _remove(doc: Any, path: str) -> Any:
    container, token = _walk(doc, path)
    try:
        return container.pop(token)
    except (KeyError, IndexError):
        raise status.unprocessable(f"doc is missing path: {path}: missing value") from None


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return copy.deepcopy(value)
    container, token = _walk(doc, path)
    if isinstance(container, list):
        assert isinstance(token, int)
        if token > len(container):
            raise status.unprocessable(f"index out of range in add: {path}")
        container.insert(token, copy.deepcopy(value))
    else:
        container[token] = copy.deepcopy(value)
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 on a copy of ``target``; any failure (a failed ``test`` too) answers 422."""
    if not isinstance(operations, list):
        raise status.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise status.unprocessable(f"invalid JSON patch operation: {operation!r}")
        op, path = operation["op"], operation["path"]
        if op == "add":
            doc = _add(doc, path, operation.get("value"))
        elif op == "remove":
            _remove(doc, path)
        elif op == "replace":
            _get(doc, path)
            if path == "":
                doc = copy.deepcopy(operation.get("value"))
            else:
                container, token = _walk(doc, path)
                container[token] = copy.deepcopy(operation.get("value"))
        elif op in ("move", "copy"):
            source = operation.get("from", "")
            value = _remove(doc, source) if op == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        elif op == "test":
            if _get(doc, path) != operation.get("value"):
                raise status.unprocessable(f"testing value {path} failed: test failed")
        else:
            raise status.unprocessable(f"Unexpected kind: {op}")
    return doc
