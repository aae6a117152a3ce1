"""Validation against the structural schema, with kube-openapi's wording."""

from __future__ import annotations

import base64
import datetime
import functools
import ipaddress
import json
import math
import re
import uuid
from collections.abc import Callable
from typing import Any

from kubecoord_testkit.emulator.admission.field_errors import _OMIT, _child, _FieldError, _go_value, _index
from kubecoord_testkit.emulator.admission.pruning import _additional, _keeps_resource_keys


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _has_type(value: Any, wanted: str) -> bool:
    actual = _json_type(value)
    if wanted == "number":
        return actual in ("integer", "number")
    if wanted == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == wanted


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


_GO_DURATION = re.compile(r"[-+]?(0|([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+")
_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*"
)
_MAC = re.compile(r"([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _parse_datetime(text: str) -> datetime.datetime:
    parsed = datetime.datetime.fromisoformat(text.replace("z", "Z"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _format_ok(fmt: str, text: str) -> bool:
    """The string formats kube-openapi checks; unknown formats (int32, ...) always pass."""
    checks: dict[str, Callable[[str], object]] = {
        "date-time": lambda s: "T" in s.upper() and _parse_datetime(s),
        "datetime": lambda s: "T" in s.upper() and _parse_datetime(s),
        "date": lambda s: _DATE.fullmatch(s) and datetime.date.fromisoformat(s),
        "duration": lambda s: _GO_DURATION.fullmatch(s),
        "uuid": lambda s: uuid.UUID(s),
        "hostname": lambda s: _HOSTNAME.fullmatch(s),
        "ipv4": lambda s: ipaddress.IPv4Address(s),
        "ipv6": lambda s: ipaddress.IPv6Address(s),
        "cidr": lambda s: ipaddress.ip_network(s, strict=False),
        "mac": lambda s: _MAC.fullmatch(s),
        "email": lambda s: _EMAIL.fullmatch(s),
        "byte": lambda s: base64.b64decode(s, validate=True) is not None,
    }
    check = checks.get(fmt)
    if check is None:
        return True
    try:
        return bool(check(text))
    except ValueError:
        return False


class _SchemaValidator:
    def __init__(self, errors: list[_FieldError]) -> None:
        self.errors = errors

    def _invalid(self, path: str, value: Any, detail: str) -> None:
        self.errors.append(_FieldError("FieldValueInvalid", path, value, f"{path} in body {detail}"))

    def validate(self, schema: dict[str, Any], value: Any, path: str, *, resource_root: bool = False) -> None:
        if value is None and schema.get("nullable"):
            return
        if schema.get("x-kubernetes-int-or-string"):
            if not isinstance(value, bool) and isinstance(value, int | str):
                self._value_checks(schema, value, path)
                return
            self.errors.append(
                _FieldError(
                    "FieldValueTypeInvalid", path, _json_type(value), f"{path} in body must be of type int-or-string"
                )
            )
            return
        wanted = schema.get("type")
        if wanted and not _has_type(value, wanted):
            actual = _json_type(value)
            self.errors.append(
                _FieldError(
                    "FieldValueTypeInvalid",
                    path,
                    actual,
                    f"{path} in body must be of type {wanted}: {json.dumps(actual)}",
                )
            )
            return
        self._value_checks(schema, value, path)
        if isinstance(value, dict):
            self._object(schema, value, path, resource_root)
        elif isinstance(value, list):
            self._array(schema, value, path)

    def _value_checks(self, schema: dict[str, Any], value: Any, path: str) -> None:
        enum = schema.get("enum")
        if enum is not None and not any(_json_equal(value, allowed) for allowed in enum):
            allowed = ", ".join(json.dumps(a if isinstance(a, str) else json.dumps(a)) for a in enum)
            self.errors.append(_FieldError("FieldValueNotSupported", path, value, f"supported values: {allowed}"))
        if isinstance(value, str):
            self._string(schema, value, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._numeric(schema, value, path)
        self._composition(schema, value, path)

    def _string(self, schema: dict[str, Any], value: str, path: str) -> None:
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            self.errors.append(
                _FieldError("FieldValueTooLong", path, value, f"may not be longer than {schema['maxLength']}")
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            self._invalid(path, value, f"should be at least {schema['minLength']} chars long")
        pattern = schema.get("pattern")
        if pattern is not None and not _compiled_pattern(pattern).search(value):
            self._invalid(path, value, f"should match '{pattern}'")
        fmt = schema.get("format")
        if fmt and not _format_ok(fmt, value):
            self._invalid(path, value, f"must be of type {fmt}: {json.dumps(value)}")

    def _numeric(self, schema: dict[str, Any], value: float, path: str) -> None:
        if "minimum" in schema:
            low = schema["minimum"]
            if schema.get("exclusiveMinimum") and value <= low:
                self._invalid(path, value, f"should be greater than {_go_value(low)}")
            elif value < low:
                self._invalid(path, value, f"should be greater than or equal to {_go_value(low)}")
        if "maximum" in schema:
            high = schema["maximum"]
            if schema.get("exclusiveMaximum") and value >= high:
                self._invalid(path, value, f"should be less than {_go_value(high)}")
            elif value > high:
                self._invalid(path, value, f"should be less than or equal to {_go_value(high)}")
        factor = schema.get("multipleOf")
        if factor and not math.isclose(value / factor, round(value / factor), rel_tol=0, abs_tol=1e-9):
            self._invalid(path, value, f"should be a multiple of {_go_value(factor)}")

    def _object(self, schema: dict[str, Any], value: dict[str, Any], path: str, resource_root: bool) -> None:
        for key in schema.get("required") or []:
            if key not in value:
                self.errors.append(_FieldError("FieldValueRequired", _child(path, key), None, ""))
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            self._invalid(path, len(value), f"should have at most {schema['maxProperties']} properties")
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            self._invalid(path, len(value), f"should have at least {schema['minProperties']} properties")
        properties: dict[str, Any] = schema.get("properties") or {}
        extra = _additional(schema)
        keep_resource = _keeps_resource_keys(schema, resource_root)
        for key, item in value.items():
            if keep_resource and key == "metadata":
                continue  # ObjectMeta is validated by the server's own rules, not the schema
            sub = properties.get(key)
            if sub is not None:
                self.validate(sub, item, _child(path, key))
            elif extra is not None:
                self.validate(extra, item, _index(path, key))

    def _array(self, schema: dict[str, Any], value: list[Any], path: str) -> None:
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            limit = schema["maxItems"]
            detail = f"must have at most {limit} {'item' if limit == 1 else 'items'}"
            self.errors.append(_FieldError("FieldValueTooMany", path, len(value), detail))
        if "minItems" in schema and len(value) < schema["minItems"]:
            self._invalid(path, value, f"should have at least {schema['minItems']} items")
        list_type = schema.get("x-kubernetes-list-type")
        if schema.get("uniqueItems") and list_type != "set" and _first_duplicate(value, lambda x: x) is not None:
            self._invalid(path, value, "shouldn't contain duplicates")
        if list_type == "set":
            duplicate = _first_duplicate(value, lambda x: x)
            if duplicate is not None:
                self.errors.append(_FieldError("FieldValueDuplicate", _index(path, duplicate), value[duplicate], ""))
        elif list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            duplicate = _first_duplicate(value, lambda x: [x.get(k) for k in keys] if isinstance(x, dict) else x)
            if duplicate is not None:
                entry = value[duplicate]
                shown = {k: entry.get(k) for k in keys} if isinstance(entry, dict) else entry
                self.errors.append(_FieldError("FieldValueDuplicate", _index(path, duplicate), shown, ""))
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                self.validate(items, item, _index(path, i))

    def _composition(self, schema: dict[str, Any], value: Any, path: str) -> None:
        for sub in schema.get("allOf") or []:
            self._value_checks(sub, value, path)
        any_of = schema.get("anyOf")
        if any_of and not any(self._passes(sub, value, path) for sub in any_of):
            self._invalid(path, _OMIT, "must validate at least one schema (anyOf)")
        one_of = schema.get("oneOf")
        if one_of and sum(self._passes(sub, value, path) for sub in one_of) != 1:
            self._invalid(path, _OMIT, "must validate one and only one schema (oneOf)")
        negated = schema.get("not")
        if negated and self._passes(negated, value, path):
            self._invalid(path, _OMIT, "must not validate the schema (not)")

    def _passes(self, schema: dict[str, Any], value: Any, path: str) -> bool:
        trial = _SchemaValidator([])
        trial.validate(schema, value, path)
        return not trial.errors


@functools.lru_cache(maxsize=512)
def _compiled_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _hashable(value: Any) -> Any:
    """``value`` as a hashable key with _json_equal's equality (true is not 1, 1 is 1.0)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)  # Python's 1 == 1.0 hash alike
    if isinstance(value, dict):
        return ("object", tuple(sorted((k, _hashable(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("array", tuple(_hashable(v) for v in value))
    return value


def _first_duplicate(items: list[Any], key: Callable[[Any], Any]) -> int | None:
    # A set, not pairwise comparisons: 4,096 unitNames took 30 s (O(n^2)) per write.
    seen: set[Any] = set()
    for i, item in enumerate(items):
        k = _hashable(key(item))
        if k in seen:
            return i
        seen.add(k)
    return None
