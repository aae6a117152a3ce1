"""Field errors as apimachinery's ``field.Error`` prints them (k8s.io/apimachinery/pkg/util/validation/field),
and ``Invalid``, the 422 Status that carries them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

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
