"""The built-in validation every write goes through, with the API server's messages.

Checked: object names (DNS-1123 subdomain, at most 253 characters; namespaces are
DNS-1123 labels), label keys and values, annotation keys and total annotation size
(256 KiB), and ConfigMap keys and total size (1 MiB). Not checked: the typed schemas of
built-in kinds (a Lease with a string leaseDurationSeconds is stored as sent).
"""

from __future__ import annotations

import base64
import re
from typing import Any

from kubecoord_testkit.emulator import status
from kubecoord_testkit.emulator.resources import ResourceType

JSON = dict[str, Any]
Cause = tuple[str, str, str]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
CONFIG_KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
MAX_ANNOTATIONS = 256 * 1024
MAX_CONFIGMAP = 1024 * 1024


def _invalid(field: str, value: str, message: str) -> Cause:
    return (field, "FieldValueInvalid", f'{field}: Invalid value: "{value}": {message}')


def _name(field: str, name: str, *, label: bool) -> list[Cause]:
    limit = 63 if label else 253
    if len(name) > limit:
        return [_invalid(field, name, f"must be no more than {limit} characters")]
    pattern, message = (_LABEL, LABEL_MSG) if label else (_SUBDOMAIN, SUBDOMAIN_MSG)
    return [] if pattern.match(name) else [_invalid(field, name, message)]


def _qualified_key(field: str, key: str) -> list[Cause]:
    prefix, _, name = key.rpartition("/")
    causes = []
    if "/" in prefix or (key.count("/") and not prefix):
        causes.append(_invalid(field, key, "a qualified name must consist of a prefix and a name"))
    elif prefix and not _SUBDOMAIN.match(prefix):
        causes.append(_invalid(field, key, "prefix part " + SUBDOMAIN_MSG))
    if len(name) > 63:
        causes.append(_invalid(field, key, "name part must be no more than 63 characters"))
    elif not _NAME_PART.match(name):
        causes.append(_invalid(field, key, NAME_PART_MSG))
    return causes


def _metadata(rtype: ResourceType, meta: JSON) -> list[Cause]:
    causes: list[Cause] = []
    name = meta.get("name") or ""
    if not name:
        causes.append(
            ("metadata.name", "FieldValueRequired", "metadata.name: Required value: name or generateName is required")
        )
    else:
        causes += _name("metadata.name", name, label=rtype.plural == "namespaces")
    labels = meta.get("labels") or {}
    for key, value in labels.items():
        causes += _qualified_key("metadata.labels", key)
        if not isinstance(value, str) or len(value) > 63:
            causes.append(_invalid("metadata.labels", str(value), "must be no more than 63 characters"))
        elif not _LABEL_VALUE.match(value):
            causes.append(_invalid("metadata.labels", value, LABEL_VALUE_MSG))
    annotations = meta.get("annotations") or {}
    for key in annotations:
        causes += _qualified_key("metadata.annotations", key)
    if sum(len(k) + len(str(v)) for k, v in annotations.items()) > MAX_ANNOTATIONS:
        causes.append(
            (
                "metadata.annotations",
                "FieldValueTooLong",
                f"metadata.annotations: Too long: must have at most {MAX_ANNOTATIONS} bytes",
            )
        )
    return causes


def _configmap(obj: JSON) -> list[Cause]:
    causes: list[Cause] = []
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    size = 0
    for section, values in (("data", data), ("binaryData", binary)):
        for key, value in values.items():
            field = f"{section}[{key}]"
            if len(key) > 253:
                causes.append(_invalid(field, key, "must be no more than 253 characters"))
            elif not _CONFIG_KEY.match(key) or key in (".", ".."):
                causes.append(_invalid(field, key, CONFIG_KEY_MSG))
            if section == "binaryData":
                try:
                    size += len(key) + len(base64.b64decode(value, validate=True))
                except ValueError:
                    raise status.bad_request(f"illegal base64 data in binaryData[{key}]") from None
            else:
                size += len(key) + len(str(value).encode("utf-8"))
    for key in set(data) & set(binary):
        causes.append(_invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    if size > MAX_CONFIGMAP:
        causes.append(("[]", "FieldValueTooLong", f"[]: Too long: must have at most {MAX_CONFIGMAP} bytes"))
    return causes


def validate(rtype: ResourceType, obj: JSON) -> None:
    """Raise 422 Invalid listing every problem, as the API server does."""
    meta = obj.get("metadata") or {}
    causes = _metadata(rtype, meta)
    if rtype.key == ("", "configmaps"):
        causes += _configmap(obj)
    if causes:
        raise status.invalid(rtype.kind, rtype.group, meta.get("name") or "", causes)
