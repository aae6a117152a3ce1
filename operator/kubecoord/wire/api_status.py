"""The Kubernetes API server's error answers (an HTTP status and its Status object) as
kubecoord errors: written once, for the kubernetes backend's client and the command
line's one-shot reader (kubecoord.cli.kubeapi), so both say the same for the same answer.

=====================================  =============================================
the API server answered                error
=====================================  =============================================
401, 403                               PermissionDeniedError naming verb and resource
404, 409, 410                          the caller's own class for it (``internal``),
                                       else CoordinationError: callers branch on these
400, 422                               InvalidArgumentError with the server's message
anything else (5xx, 429, ...)          BackendUnavailableError
=====================================  =============================================
"""

from __future__ import annotations

from collections.abc import Mapping

from kubecoord.errors import BackendUnavailableError, CoordinationError, InvalidArgumentError, PermissionDeniedError
from kubecoord.wire.json_text import loads_object

_INTERNAL_MESSAGES = {404: "not found", 409: "conflict: {message}", 410: "resource version too old: {message}"}


def status_message(body: str | bytes | None) -> str:
    """The Status object's message (or reason), else the first 200 characters of the body."""
    if not body:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        parsed = loads_object(text)
    except ValueError:  # not a Status: an error page from a proxy, say
        return text[:200]
    return str(parsed.get("message") or parsed.get("reason") or "")


def translate_status(
    status: int | None,
    body: str | bytes | None,
    verb: str,
    plural: str,
    name: str | None,
    namespace: str,
    *,
    internal: Mapping[int, type[CoordinationError]] | None = None,
) -> CoordinationError:
    """The kubecoord error for an HTTP error status of the API server (the table above)."""
    what = f"{verb} {plural}" + (f" {name!r}" if name else "") + f" in namespace {namespace!r}"
    message = status_message(body)
    code = status or 0
    if code in (401, 403):
        return PermissionDeniedError(f"not allowed to {what} (HTTP {code}): {message}")
    if code in _INTERNAL_MESSAGES:
        return (internal or {}).get(code, CoordinationError)(
            f"{what}: " + _INTERNAL_MESSAGES[code].format(message=message)
        )
    if code in (400, 422):
        return InvalidArgumentError(f"the API server rejected {what} (HTTP {code}): {message}")
    return BackendUnavailableError(f"cannot {what} (HTTP {code}): {message}")
