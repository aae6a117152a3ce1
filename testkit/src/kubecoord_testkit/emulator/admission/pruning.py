"""Pruning of undeclared fields and defaulting, over structural schemas."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

# The keys of a resource (and of an embedded resource) that pruning never drops.
_RESOURCE_KEYS = ("apiVersion", "kind", "metadata")


def _keeps_resource_keys(schema: dict[str, Any], resource_root: bool) -> bool:
    return resource_root or bool(schema.get("x-kubernetes-embedded-resource"))


def _additional(schema: dict[str, Any]) -> dict[str, Any] | None:
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _into_items(schema: dict[str, Any], value: Any, step: Callable[[dict[str, Any], Any], None]) -> bool:
    """Apply ``step`` to each item of a list value; False when ``value`` is an object."""
    if isinstance(value, dict):
        return False
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        for item in value:
            step(items, item)
    return True


def _prune(schema: dict[str, Any], value: Any, *, resource_root: bool = False) -> None:
    if _into_items(schema, value, _prune):
        return
    properties: dict[str, Any] = schema.get("properties") or {}
    extra = _additional(schema)
    keep_resource = _keeps_resource_keys(schema, resource_root)
    for key in list(value):
        if keep_resource and key in _RESOURCE_KEYS:
            continue  # metadata is ObjectMeta's business, never the schema's
        if key in properties:
            _prune(properties[key], value[key])
        elif extra is not None:
            _prune(extra, value[key])
        elif not (schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("additionalProperties") is True):
            del value[key]


def _default(schema: dict[str, Any], value: Any, *, resource_root: bool = False) -> None:
    if _into_items(schema, value, _default):
        return
    properties: dict[str, Any] = schema.get("properties") or {}
    keep_resource = _keeps_resource_keys(schema, resource_root)
    for key, sub in properties.items():
        if keep_resource and key in _RESOURCE_KEYS:
            continue
        if value.get(key) is None and not (key in value and sub.get("nullable")):
            if "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            else:
                value.pop(key, None)  # a non-nullable null is pruned
    for key, item in value.items():
        if keep_resource and key in _RESOURCE_KEYS:
            continue
        sub = properties.get(key) or _additional(schema)
        if sub is not None:
            _default(sub, item)
