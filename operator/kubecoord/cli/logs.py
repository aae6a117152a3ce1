"""Logging set-up for kubecoord's own commands (the library itself only emits records).

Quiet by default: warnings and errors only. Records are structured — one JSON object
per line with the message, the logger, the level and every ``extra=`` field — so that
log collectors can index them; ``text`` format is for people at a terminal.

Every line's ``time`` is RFC 3339 in UTC with milliseconds and the offset
(``2026-11-25T17:06:41.123+00:00``): a line read later, or from another zone, says when.

kopf's per-object records carry its whole OperatorSettings (``settings``), a flag
(``k8s_skip``) and the object reference (``k8s_ref``) as attributes: the settings are
dropped (a dump of every setting on every line helps nobody), the reference becomes one
``object`` field ("Kind namespace/name"), as kopf's own JSON formatter does.

An API answer of 401 or 403 is a missing grant, never routine: such records (a
``status_code`` field of 401/403, or an error saying ``HTTP 403``) are logged at WARNING
at least, and the kubernetes client's dump of the response headers is cut from any error
text or traceback (the request and the API's message, which names the verb and the
resource, stay).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sys
from typing import Any

EXPECTED_KOPF_WARNINGS = frozenset({
    # kubecoord runs kopf in a thread of its own and handles SIGTERM itself (operator/ha.py).
    "OS signals are ignored: running not in the main thread.",
})
"""kopf warnings that are normal operation for kubecoord's operator: logged at INFO."""


_HEADERS = re.compile(r"HTTP response headers: .*?(?=\nHTTP response body:|\n|$)", re.S)
_DENIED = re.compile(r"(?:HTTP |\()40[13]\b|\b40[13] Forbidden\b|\bForbidden\b.*\bcannot\b")


def without_headers(text: str) -> str:
    """``text`` without the kubernetes client's "HTTP response headers: ..." dump."""
    return _HEADERS.sub("HTTP response headers: (left out)", text)


def _rfc3339(created: float) -> str:
    return dt.datetime.fromtimestamp(created, dt.UTC).isoformat(timespec="milliseconds")


def _json_formatter() -> logging.Formatter:
    from pythonjsonlogger.json import JsonFormatter

    class _JsonFormatter(JsonFormatter):
        def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
            return _rfc3339(record.created)

        def formatException(self, ei: Any) -> str:
            return without_headers(str(super().formatException(ei)))

    return _JsonFormatter(
        "{asctime}{levelname}{name}{message}",
        style="{",
        rename_fields={"levelname": "level", "asctime": "time"},
        # str() rather than the library's dataclass expansion, which deep-copies
        # kopf's records and fails on the queues inside them.
        json_default=str,
    )


class _LazyJsonFormatter(logging.Formatter):
    """python-json-logger's formatter, imported on the first record: a state command that
    logs nothing (the usual case) does not pay for the import at start-up."""

    def __init__(self) -> None:
        super().__init__()
        self._inner: logging.Formatter | None = None

    def format(self, record: logging.LogRecord) -> str:
        if self._inner is None:
            self._inner = _json_formatter()
        return self._inner.format(record)


class _TextFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _rfc3339(record.created)

    def formatException(self, ei: Any) -> str:
        return without_headers(super().formatException(ei))


class KopfRecordFilter(logging.Filter):
    """Drop kopf's settings from its records and fold its object reference into one field;
    kopf warnings that describe kubecoord's normal operation become INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and record.name.startswith("kopf") and (
            record.getMessage() in EXPECTED_KOPF_WARNINGS
        ):
            record.levelno, record.levelname = logging.INFO, "INFO"
            if logging.getLogger().getEffectiveLevel() > logging.INFO:
                return False
        fields = record.__dict__
        error = fields.get("error")
        if isinstance(error, str):
            fields["error"] = error = without_headers(error)
        if record.levelno < logging.WARNING and (
            fields.get("status_code") in (401, 403) or (isinstance(error, str) and _DENIED.search(error))
        ):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        fields.pop("settings", None)
        fields.pop("k8s_skip", None)
        ref = fields.pop("k8s_ref", None)
        if isinstance(ref, dict) and "object" not in fields:
            where = f"{ref['namespace']}/{ref.get('name')}" if ref.get("namespace") else str(ref.get("name"))
            fields["object"] = f"{ref.get('kind')} {where}"
        return True


def configure(level: str = "WARNING", fmt: str = "json") -> None:
    """Send kubecoord's log records (and kopf's, pyspark's) to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(KopfRecordFilter())
    if fmt == "json":
        handler.setFormatter(_LazyJsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
