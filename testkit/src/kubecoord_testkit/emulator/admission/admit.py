"""The entry point: ``admit(crd, obj, old, subresource)``, the status subresource and the
server's order of steps (see the package docstring)."""

from __future__ import annotations

import copy
import re
from typing import Any

from kubecoord_testkit.emulator.admission.cel_rules import _RuleValidator
from kubecoord_testkit.emulator.admission.field_errors import _FieldError, _invalid
from kubecoord_testkit.emulator.admission.pruning import _default, _prune
from kubecoord_testkit.emulator.admission.schema_validation import _SchemaValidator

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
