"""Admission of custom resources as kube-apiserver's apiextensions-apiserver does it.

``admit(crd, obj, old, subresource)`` returns the object as the API server would store
it, or raises ``Invalid`` carrying the v1 Status (422, reason Invalid) the server
answers, with one cause per field error. The steps, in the server's order:

1. Status subresource: on create the status is dropped; an update of the main resource
   keeps the old status; an update of ``/status`` keeps everything but the status (and
   the new resourceVersion, so the caller's optimistic-concurrency check still sees it).
2. Pruning: fields the schema does not declare are dropped, unless a node says
   ``x-kubernetes-preserve-unknown-fields: true``. ``apiVersion``, ``kind`` and
   ``metadata`` of the resource (and of ``x-kubernetes-embedded-resource`` nodes) are kept.
3. Defaulting: ``default`` values are filled in where a field is absent (or null and not
   nullable), recursively, so defaults inside a defaulted object apply too; other
   non-nullable nulls are dropped.
4. Validation of the structural schema: type, required, enum, pattern, minimum /
   maximum (exclusive), multipleOf, minLength / maxLength, minItems / maxItems,
   uniqueItems, list-type set / map uniqueness, min/maxProperties, simple formats,
   allOf / anyOf / oneOf / not.
5. ``x-kubernetes-validations`` CEL rules (cel-python), with ``self`` typed from the
   schema (``number`` is a double, ``integer`` an int, ``format: duration`` / ``date-time``
   are durations / timestamps, property names escaped as Kubernetes does) and
   ``oldSelf`` on updates. Transition rules (those using ``oldSelf``) run only where an
   old value exists. ``message``, ``messageExpression``, ``fieldPath`` and ``reason`` are
   honoured. As in the server, the rules are skipped when step 4 found a type error.
   cel-python interprets a rule in about a millisecond, so results are remembered
   (bounded LRU) by expression, node schema and the top-level fields the rule reads: a
   status write re-checks an unchanged spec from memory (bench/bench_admission.py).

Messages follow apimachinery's ``field.Error`` and kube-openapi's wording as of
Kubernetes 1.32, e.g. ``LeaderElection.kubecoord.dev "billing" is invalid:
spec.renewDeadlineSeconds: Invalid value: "object": renewDeadlineSeconds must be less
than leaseDurationSeconds`` (a rule's failure shows the type of the node it is declared
on; 1.35 shows scalar values instead).

Not guaranteed: CEL type checking at CRD creation (a rule naming an undeclared field
fails at admission with "no such key" instead of being refused with the CRD), cost
budgets, validation ratcheting of unchanged fields, ``optionalOldSelf``, the
``fieldValidation=Strict`` query parameter (unknown fields are always pruned silently),
metadata pruning and generation bookkeeping (the emulator's business). The CEL library
covers the standard functions plus Kubernetes' string (lowerAscii, upperAscii, trim,
replace, split, join, indexOf, lastIndexOf, substring, charAt), list (sum, min, max,
isSorted) and regex (find, findAll) extensions and cross-type numeric comparisons.
"""

from __future__ import annotations

import base64
import copy
import datetime
import functools
import ipaddress
import itertools
import json
import math
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import celpy
import celpy.adapter
import celpy.celtypes as ct
from celpy import evaluation
from celpy.celparser import CELParseError

__all__ = ["Invalid", "admit"]

# ---------------------------------------------------------------------------------------
# Field errors (k8s.io/apimachinery/pkg/util/validation/field)
# ---------------------------------------------------------------------------------------

# cause type -> the words field.Error prints before the value
_TYPE_WORDS = {
    "FieldValueRequired": "Required value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueTypeInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueForbidden": "Forbidden",
}
# Types whose message never shows the bad value.
_VALUELESS = {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong"}


class _Omit:
    """field.OmitValueType: the message leaves the value out (objects and lists)."""


_OMIT = _Omit()


@dataclass(frozen=True)
class _FieldError:
    type: str
    field: str
    value: Any
    detail: str

    def body(self) -> str:
        words = _TYPE_WORDS[self.type]
        text = words if self.type in _VALUELESS or self.value is _OMIT else f"{words}: {_go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field or '<nil>'}: {self.body()}"


def _go_value(value: Any) -> str:
    """Render a bad value as Go's fmt does in field.Error (strings quoted, 20 not 20.0)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, default=str)


class Invalid(Exception):
    """The object was refused; ``status`` is the v1 Status the API server answers (422)."""

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status["message"])
        self.status = status

    @property
    def status_body(self) -> dict[str, Any]:
        """The same Status, under the name the emulator's call site (admitting.py) reads."""
        return self.status


def _invalid(crd: dict[str, Any], name: str, errors: list[_FieldError]) -> Invalid:
    group = crd.get("spec", {}).get("group", "")
    kind = crd.get("spec", {}).get("names", {}).get("kind", "")
    qualified = f"{kind}.{group}" if group else kind
    # utilerrors.NewAggregate: duplicates collapse, several errors are bracketed.
    messages = list(dict.fromkeys(str(e) for e in errors))
    joined = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    return Invalid(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"{qualified} {json.dumps(name)} is invalid: {joined}",
            "reason": "Invalid",
            "details": {
                "name": name,
                "group": group,
                "kind": kind,
                "causes": [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors],
            },
            "code": 422,
        }
    )


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _index(path: str, index: int | str) -> str:
    return f"{path}[{index}]"


# ---------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------

_RESOURCE_KEYS = ("apiVersion", "kind", "metadata")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
    "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def admit(
    crd: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
) -> dict[str, Any]:
    """Return ``obj`` pruned, defaulted and validated against ``crd``, or raise ``Invalid``.

    ``old`` is the stored object on update and patch (None on create); ``subresource`` is
    None for the resource itself or ``"status"``. Neither argument is modified.
    """
    version = _served_version(crd, obj)
    new = copy.deepcopy(obj)
    if version.get("subresources", {}).get("status") is not None:
        new = _apply_status_subresource(new, old, subresource)
    schema = version.get("schema", {}).get("openAPIV3Schema")
    errors: list[_FieldError] = []
    name = new.get("metadata", {}).get("name") or ""
    if name and (len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name)):
        errors.append(_FieldError("FieldValueInvalid", "metadata.name", name, _SUBDOMAIN_MESSAGE))
    if schema is not None:
        _prune(schema, new, resource_root=True)
        _default(schema, new, resource_root=True)
        _SchemaValidator(errors).validate(schema, new, "", resource_root=True)
        if any(e.type == "FieldValueTypeInvalid" for e in errors):
            errors.append(
                _FieldError(
                    "FieldValueInvalid",
                    "",
                    None,
                    "some validation rules were not checked because the object was invalid; "
                    "correct the existing errors to complete validation",
                )
            )
        else:
            _RuleValidator(errors).validate(schema, new, old, "", resource_root=True)
    if errors:
        raise _invalid(crd, name, errors)
    return new


def _served_version(crd: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    wanted = str(obj.get("apiVersion", "")).rpartition("/")[2]
    for version in crd.get("spec", {}).get("versions", []):
        if version.get("name") == wanted:
            return dict(version)
    return {}  # unknown version: nothing to enforce (serving it is the caller's decision)


def _apply_status_subresource(
    new: dict[str, Any], old: dict[str, Any] | None, subresource: str | None
) -> dict[str, Any]:
    if subresource == "status":
        if old is None:
            return new
        # Only the status may change through /status; the rest stays as stored.
        result = copy.deepcopy(old)
        if "status" in new:
            result["status"] = new["status"]
        else:
            result.pop("status", None)
        resource_version = new.get("metadata", {}).get("resourceVersion")
        if resource_version is not None:
            result.setdefault("metadata", {})["resourceVersion"] = resource_version
        return result
    if old is None:
        new.pop("status", None)  # status is written through /status only
    elif "status" in old:
        new["status"] = copy.deepcopy(old["status"])
    else:
        new.pop("status", None)
    return new


# ---------------------------------------------------------------------------------------
# Pruning and defaulting (structural schemas)
# ---------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------
# Structural-schema validation (kube-openapi's wording)
# ---------------------------------------------------------------------------------------


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


def _first_duplicate(items: list[Any], key: Callable[[Any], Any]) -> int | None:
    seen: list[Any] = []
    for i, item in enumerate(items):
        k = key(item)
        if any(_json_equal(k, s) for s in seen):
            return i
        seen.append(k)
    return None


# ---------------------------------------------------------------------------------------
# x-kubernetes-validations (CEL)
# ---------------------------------------------------------------------------------------

# Kubernetes escapes property names that are not CEL identifiers or are reserved words.
_CEL_RESERVED = frozenset(
    {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if"}
    | {"import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
)
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_ESCAPE_PATTERN = re.compile(r"__|[./-]")


def _escape(name: str) -> str:
    if name in _CEL_RESERVED:
        return f"__{name}__"
    return _ESCAPE_PATTERN.sub(lambda m: _ESCAPES[m.group(0)], name)


def _to_cel(schema: dict[str, Any] | None, value: Any, *, resource_root: bool = False) -> Any:
    """Convert a JSON value to CEL the way Kubernetes types it from the schema."""
    if value is None:
        return None
    if schema is None or schema.get("x-kubernetes-int-or-string"):
        return celpy.adapter.json_to_cel(value)
    kind = schema.get("type")
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int | float):
        return ct.DoubleType(value) if kind == "number" else ct.IntType(int(value))
    if isinstance(value, str):
        fmt = schema.get("format")
        try:
            if fmt == "duration":
                return ct.DurationType(value)
            if fmt in ("date-time", "datetime"):
                return ct.TimestampType(_parse_datetime(value))
        except ValueError:
            pass
        return ct.StringType(value)
    if isinstance(value, list):
        items = schema.get("items")
        return ct.ListType([_to_cel(items if isinstance(items, dict) else None, item) for item in value])
    properties: dict[str, Any] = schema.get("properties") or {}
    result = ct.MapType()
    if properties:
        for key, item in value.items():
            if key in properties:
                result[ct.StringType(_escape(key))] = _to_cel(properties[key], item)
            elif schema.get("x-kubernetes-preserve-unknown-fields"):
                result[ct.StringType(_escape(key))] = celpy.adapter.json_to_cel(item)
    else:
        extra = _additional(schema)
        for key, item in value.items():
            result[ct.StringType(key)] = _to_cel(extra, item)
    if _keeps_resource_keys(schema, resource_root):
        # The rules see apiVersion, kind and only metadata.name / generateName.
        for key in ("apiVersion", "kind"):
            if isinstance(value.get(key), str):
                result[ct.StringType(key)] = ct.StringType(value[key])
        metadata = value.get("metadata")
        if isinstance(metadata, dict):
            result[ct.StringType("metadata")] = ct.MapType(
                {ct.StringType(k): ct.StringType(metadata[k]) for k in ("name", "generateName") if k in metadata}
            )
    return result


def _is_go_value(value: Any) -> bool:
    return isinstance(value, ct.IntType | ct.UintType | ct.DoubleType)


def _numeric_relation(name: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    """Kubernetes enables cel-go's cross-type numeric comparisons (1 < 1.5, 2 == 2.0)."""
    base = evaluation.base_functions[name]

    def relation(a: Any, b: Any) -> Any:
        if _is_go_value(a) and _is_go_value(b) and type(a) is not type(b):
            return ct.BoolType(compare(float(a), float(b)))
        return base(a, b)

    return relation


def _list_sum(items: Any) -> Any:
    total: Any = ct.IntType(0)
    for item in items:
        total = total + item
    return total


def _index_of(receiver: Any, needle: Any, start: Any = None) -> Any:
    if isinstance(receiver, str):
        return ct.IntType(receiver.find(needle, int(start or 0)))
    for i, item in enumerate(receiver):
        if item == needle:
            return ct.IntType(i)
    return ct.IntType(-1)


def _last_index_of(receiver: Any, needle: Any) -> Any:
    if isinstance(receiver, str):
        return ct.IntType(receiver.rfind(needle))
    for i in range(len(receiver) - 1, -1, -1):
        if receiver[i] == needle:
            return ct.IntType(i)
    return ct.IntType(-1)


def _split(text: Any, separator: Any, limit: Any = None) -> Any:
    parts = text.split(separator) if limit is None or int(limit) < 0 else text.split(separator, max(int(limit) - 1, 0))
    return ct.ListType([ct.StringType(p) for p in parts])


_EXTENSIONS: dict[str, Callable[..., Any]] = {
    "_<_": _numeric_relation("_<_", lambda a, b: a < b),
    "_<=_": _numeric_relation("_<=_", lambda a, b: a <= b),
    "_>_": _numeric_relation("_>_", lambda a, b: a > b),
    "_>=_": _numeric_relation("_>=_", lambda a, b: a >= b),
    "_==_": _numeric_relation("_==_", lambda a, b: a == b),
    "_!=_": _numeric_relation("_!=_", lambda a, b: a != b),
    # Kubernetes' string library (cel-go ext.Strings)
    "lowerAscii": lambda s: ct.StringType(s.lower()),
    "upperAscii": lambda s: ct.StringType(s.upper()),
    "trim": lambda s: ct.StringType(s.strip()),
    "replace": lambda s, old, new, n=None: ct.StringType(s.replace(old, new, -1 if n is None else int(n))),
    "split": _split,
    "join": lambda items, sep="": ct.StringType(sep.join(items)),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "substring": lambda s, start, end=None: ct.StringType(s[int(start) : None if end is None else int(end)]),
    "charAt": lambda s, i: ct.StringType(s[int(i)] if int(i) < len(s) else ""),
    # Kubernetes' list and regex libraries
    "sum": _list_sum,
    "min": lambda items: min(items),
    "max": lambda items: max(items),
    "isSorted": lambda items: ct.BoolType(all(a <= b for a, b in itertools.pairwise(items))),
    "find": lambda s, regex: ct.StringType(m.group(0) if (m := re.search(regex, s)) else ""),
    "findAll": lambda s, regex, n=None: ct.ListType(
        [ct.StringType(m.group(0)) for m in re.finditer(regex, s)][: None if n is None or int(n) < 0 else int(n)]
    ),
}

_ENVIRONMENT = celpy.Environment()
_OLD_SELF = re.compile(r"\boldSelf\b")


class _RuleError(Exception):
    """A rule could not be compiled or evaluated; the message is the API server's detail."""


@functools.lru_cache(maxsize=1024)
def _program(expression: str) -> celpy.Runner:
    try:
        ast = _ENVIRONMENT.compile(expression)
    except CELParseError as error:
        raise _RuleError(f"rule compile error: {error}") from None
    return _ENVIRONMENT.program(ast, functions=_EXTENSIONS)


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    program = _program(expression)
    try:
        return program.evaluate(activation)
    except evaluation.CELEvalError as error:
        raise _RuleError(_eval_error_text(error)) from None
    except (TypeError, ValueError, KeyError, IndexError, ArithmeticError, AttributeError) as error:
        raise _RuleError(str(error)) from None


def _eval_error_text(error: evaluation.CELEvalError) -> str:
    args = error.args
    if len(args) >= 2 and args[1] is KeyError:
        # cel-go says "no such key: name"
        detail = args[0]
        match = re.search(r"'([^']+)'", str(detail))
        return f"no such key: {match.group(1)}" if match else str(detail)
    return str(args[0]) if args else str(error)


def _rule_text(rule: dict[str, Any]) -> str:
    return str(rule.get("message") or rule.get("rule", "")).strip()


def _normalized_field_path(path: str, schema: dict[str, Any], field_path: str) -> str:
    """Resolve a rule's fieldPath (``.a.b``, ``['x.y']``) below ``path`` as the server does."""
    for match in re.finditer(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]", field_path):
        name = match.group(1) if match.group(1) is not None else re.sub(r"\\(.)", r"\1", match.group(2))
        properties = schema.get("properties") or {}
        if name in properties:
            path, schema = _child(path, name), properties[name]
        else:
            path, schema = _index(path, name), _additional(schema) or {}
    return path


class _RuleValidator:
    def __init__(self, errors: list[_FieldError]) -> None:
        self.errors = errors

    def validate(self, schema: dict[str, Any], value: Any, old: Any, path: str, *, resource_root: bool = False) -> None:
        if value is None:
            return  # rules validate non-null values only
        rules = schema.get("x-kubernetes-validations") or []
        if rules:
            self._rules(schema, rules, value, old, path, resource_root)
        for sub in schema.get("allOf") or []:
            sub_rules = sub.get("x-kubernetes-validations") or []
            if sub_rules:
                self._rules(schema, sub_rules, value, old, path, resource_root)
        if isinstance(value, dict):
            for _key, sub, item, old_item, item_path in self._object_children(schema, value, old, path, resource_root):
                self.validate(sub, item, old_item, item_path)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                self.validate(schema["items"], item, _correlated_item(schema, item, old), _index(path, i))

    def _object_children(
        self, schema: dict[str, Any], value: dict[str, Any], old: Any, path: str, resource_root: bool
    ) -> Iterator[tuple[str, dict[str, Any], Any, Any, str]]:
        properties: dict[str, Any] = schema.get("properties") or {}
        extra = _additional(schema)
        old_map = old if isinstance(old, dict) else {}
        atomic = schema.get("x-kubernetes-map-type") == "atomic"
        for key, item in value.items():
            if _keeps_resource_keys(schema, resource_root) and key in _RESOURCE_KEYS:
                continue
            if key in properties:
                yield key, properties[key], item, old_map.get(key), _child(path, key)
            elif extra is not None:
                yield key, extra, item, None if atomic else old_map.get(key), _index(path, key)

    def _rules(
        self, schema: dict[str, Any], rules: list[dict[str, Any]], value: Any, old: Any, path: str, resource_root: bool
    ) -> None:
        scope_type = schema.get("type", "object" if isinstance(value, dict) else "")
        scope = _Scope(schema, value, old, resource_root)
        for rule in rules:
            expression = str(rule.get("rule", ""))
            if not expression or (_uses_old_self(expression) and old is None):
                continue  # transition rules need an existing value to compare with
            try:
                verdict = scope.evaluate(expression)
            except _RuleError as error:
                detail = str(error)
                if not detail.startswith("rule compile error"):
                    detail = f"{detail} evaluating rule: {_rule_text(rule)}"
                self.errors.append(_FieldError("FieldValueInvalid", path, scope_type, detail))
                continue
            if verdict is True or (isinstance(verdict, ct.BoolType) and bool(verdict)):
                continue
            self.errors.append(self._failure(schema, rule, value, path, scope, scope_type))

    def _failure(
        self,
        schema: dict[str, Any],
        rule: dict[str, Any],
        value: Any,
        path: str,
        scope: _Scope,
        scope_type: str,
    ) -> _FieldError:
        detail = _message_from_expression(rule, scope)
        if detail is None:
            detail = rule["message"].strip() if rule.get("message") else f"failed rule: {_rule_text(rule)}"
        field = _normalized_field_path(path, schema, rule["fieldPath"]) if rule.get("fieldPath") else path
        reason = rule.get("reason") or "FieldValueInvalid"
        if reason not in ("FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"):
            reason = "FieldValueInvalid"
        # Kubernetes up to 1.34 (the emulator follows 1.32) shows the type of the rule's
        # node as the value, whatever fieldPath says: Invalid value: "object": MESSAGE.
        return _FieldError(reason, field, scope_type, "" if reason == "FieldValueDuplicate" else detail)


def _message_from_expression(rule: dict[str, Any], scope: _Scope) -> str | None:
    expression = rule.get("messageExpression")
    if not expression:
        return None
    try:
        message = scope.evaluate(str(expression))
    except _RuleError:
        return None  # the server logs it and falls back to message
    if not isinstance(message, str) or not message.strip() or "\n" in message.strip():
        return None
    return message.strip()


@functools.lru_cache(maxsize=1024)
def _uses_old_self(expression: str) -> bool:
    return bool(_OLD_SELF.search(expression))


def _visible(value: Any, resource_root: bool) -> Any:
    """What the rules of a node can see: at the resource root, only metadata.name and
    generateName of the metadata (resourceVersion & co. change on every write)."""
    if resource_root and isinstance(value, dict) and isinstance(value.get("metadata"), dict):
        metadata = {k: v for k, v in value["metadata"].items() if k in ("name", "generateName")}
        return {**value, "metadata": metadata}
    return value


_FIELD_READ = re.compile(r"\b(?:self|oldSelf)\.([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")
_SELF_NAMED = re.compile(r"\b(?:self|oldSelf)\b")


@functools.lru_cache(maxsize=1024)
def _fields_read(expression: str) -> frozenset[str] | None:
    """The (escaped) top-level fields of self/oldSelf a rule reads, when it reads them only
    as ``self.field``; None when it uses self whole (``self == oldSelf``, ``size(self)``,
    ``self.all(...)``)."""
    reads = _FIELD_READ.findall(expression)
    return frozenset(reads) if len(reads) == len(_SELF_NAMED.findall(expression)) else None


def _read_part(value: Any, fields: frozenset[str] | None) -> Any:
    if fields is None or not isinstance(value, dict):
        return value
    return {key: item for key, item in value.items() if _escape(key) in fields}


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


class _Scope:
    """``self`` and ``oldSelf`` of one schema node, converted to CEL only when a rule is
    evaluated. A rule is a pure function of them, and a status write re-checks the same
    spec with the same rules, so results are remembered across admissions, keyed by the
    expression, the node's schema (it decides the CEL types) and the values the rule sees."""

    def __init__(self, schema: dict[str, Any], value: Any, old: Any, resource_root: bool) -> None:
        self.schema, self.value, self.old, self.resource_root = schema, value, old, resource_root
        self._activation: dict[str, Any] | None = None
        self._schema_key: str | None = None

    def _activation_now(self) -> dict[str, Any]:
        if self._activation is None:
            self._activation = {"self": _to_cel(self.schema, self.value, resource_root=self.resource_root)}
            if self.old is not None:
                self._activation["oldSelf"] = _to_cel(self.schema, self.old, resource_root=self.resource_root)
        return self._activation

    def _cache_key(self, expression: str) -> tuple[str, str, str, str]:
        if self._schema_key is None:
            self._schema_key = _dump(self.schema)
        fields = _fields_read(expression)
        value_key = _dump(_read_part(_visible(self.value, self.resource_root), fields))
        old_key = ""
        if _uses_old_self(expression):
            old_key = _dump(_read_part(_visible(self.old, self.resource_root), fields))
        return expression, self._schema_key, value_key, old_key

    def evaluate(self, expression: str) -> Any:
        key = self._cache_key(expression)
        outcome = _RESULTS.get(key)
        if outcome is None:
            try:
                outcome = (True, _evaluate(expression, self._activation_now()))
            except _RuleError as error:
                outcome = (False, str(error))
            _RESULTS.put(key, outcome)
        succeeded, result = outcome
        if not succeeded:
            raise _RuleError(result)
        return result


class _LruCache:
    """A bounded, thread-safe map that forgets the least recently used entry first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)


_RESULTS = _LruCache(4096)


def _correlated_item(schema: dict[str, Any], item: Any, old: Any) -> Any:
    """Only list-type map items correlate with an old item (by their keys), as in the server."""
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list) or not isinstance(item, dict):
        return None
    keys = schema.get("x-kubernetes-list-map-keys") or []
    for candidate in old:
        if isinstance(candidate, dict) and all(_json_equal(candidate.get(k), item.get(k)) for k in keys):
            return candidate
    return None
