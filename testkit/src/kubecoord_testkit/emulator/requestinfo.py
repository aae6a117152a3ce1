"""Parsing a request URL into what the API server calls RequestInfo, and the record of
every request the emulator answered (for tests that count API calls)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class RecordedRequest:
    """One answered request. ``verb`` is the Kubernetes verb (get, list, watch, create,
    update, patch, delete, deletecollection) or the lower-case HTTP method for
    non-resource URLs; ``status`` is the HTTP code (0: dropped unanswered while hung)."""

    method: str
    path: str
    query: dict[str, str]
    verb: str
    resource: str | None
    namespace: str | None
    name: str | None
    status: int
    watch: bool
    subresource: str | None = None
    user: str | None = None
    group: str | None = None


@dataclass
class RequestInfo:
    method: str
    path: str
    query: dict[str, str]
    resource_request: bool = False
    group: str = ""
    version: str = ""
    plural: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    verb: str = ""
    watch: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "t", "yes")


def parse(method: str, path: str, query: dict[str, str]) -> RequestInfo:
    info = RequestInfo(method, path, query, verb=method.lower())
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        info.version, rest = parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        info.group, info.version, rest = parts[1], parts[2], parts[3:]
    else:
        return info
    if not rest:
        return info
    watch = _truthy(query.get("watch"))
    if rest[0] == "watch":  # the deprecated /watch/ path prefix
        watch, rest = True, rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces" and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES):
        info.namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return info
    info.resource_request = True
    info.plural = rest[0]
    info.name = rest[1] if len(rest) > 1 else None
    info.subresource = rest[2] if len(rest) > 2 else None
    if method == "GET":
        info.verb = "watch" if watch else ("get" if info.name else "list")
        if watch and info.name:  # a watch on one object is a watch filtered by name
            info.extra["name_filter"] = info.name
    elif method == "DELETE":
        info.verb = "delete" if info.name else "deletecollection"
    else:
        info.verb = _VERBS.get(method, method.lower())
    info.watch = info.verb == "watch"
    return info
