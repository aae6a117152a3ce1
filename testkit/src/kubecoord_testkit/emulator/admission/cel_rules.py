"""``x-kubernetes-validations``: CEL rules evaluated with cel-python, ``self`` typed from the
schema, results remembered in a bounded LRU."""

from __future__ import annotations

import functools
import itertools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import celpy
import celpy.adapter
import celpy.celtypes as ct
from celpy import evaluation
from celpy.celparser import CELParseError

from kubecoord_testkit.emulator.admission.field_errors import _child, _FieldError, _index
from kubecoord_testkit.emulator.admission.pruning import _RESOURCE_KEYS, _additional, _keeps_resource_keys
from kubecoord_testkit.emulator.admission.schema_validation import _json_equal, _parse_datetime

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
