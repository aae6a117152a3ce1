"""Error responses as the API server writes them: v1 Status objects.

Every failure the emulator answers is a ``StatusError`` carrying a complete v1 Status
body (kind, apiVersion, metadata, status "Failure", message, reason, code, details), with
the messages the real kube-apiserver v1.32 uses, so that clients which branch on
``reason`` or show the message behave as they do against a cluster.
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]


class StatusError(Exception):
    """A request failed; ``body`` is the v1 Status the server answers with."""

    def __init__(self, code: int, reason: str, message: str, details: JSON | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "details": details if details is not None else {},
            "code": code,
        }

    @classmethod
    def from_body(cls, body: JSON) -> StatusError:
        """Wrap a Status body built elsewhere (the admission module's Invalid)."""
        error = cls(int(body.get("code", 422)), str(body.get("reason", "Invalid")), str(body.get("message", "")))
        error.body = {**error.body, **body}
        return error


def qualified(group: str, plural: str) -> str:
    """``leases.coordination.k8s.io`` or ``configmaps``: how messages name a resource."""
    return f"{plural}.{group}" if group else plural


def _details(group: str, plural: str, name: str | None) -> JSON:
    details: JSON = {"kind": plural}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def not_found(group: str, plural: str, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{qualified(group, plural)} "{name}" not found', _details(group, plural, name))


def already_exists(group: str, plural: str, name: str) -> StatusError:
    return StatusError(
        409, "AlreadyExists", f'{qualified(group, plural)} "{name}" already exists', _details(group, plural, name)
    )


def conflict(group: str, plural: str, name: str, reason: str | None = None) -> StatusError:
    why = reason or "the object has been modified; please apply your changes to the latest version and try again"
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {why}',
        _details(group, plural, name),
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> StatusError:
    """422 Invalid. ``causes`` are (field, reason type, message) as field.Error renders them."""
    label = f"{kind}.{group}" if group else kind
    text = ", ".join(message for _, _, message in causes)
    if len(causes) > 1:
        text = "[" + text + "]"
    return StatusError(
        422,
        "Invalid",
        f'{label} "{name}" is invalid: {text}',
        {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": reason, "message": message, "field": field} for field, reason, message in causes],
        },
    )


def unprocessable(message: str) -> StatusError:
    """422 from a patch that cannot be applied (the API server's generic server response)."""
    return StatusError(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        {"causes": [{"reason": "UnexpectedServerResponse", "message": message}]},
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def gone(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


def forbidden(group: str, plural: str, name: str | None, message: str) -> StatusError:
    prefix = f'{qualified(group, plural)} "{name}"' if name else qualified(group, plural)
    return StatusError(403, "Forbidden", f"{prefix} is forbidden: {message}", _details(group, plural, name))


def no_route() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource")


def method_not_allowed(verb: str, group: str, plural: str) -> StatusError:
    return StatusError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({verb} {qualified(group, plural)})",
    )


def unsupported_media_type(content_type: str) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        f'application/json, application/yaml (got "{content_type}")',
    )
