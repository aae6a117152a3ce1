"""kubecoord's log lines (operator, CLI): a time with date and zone, 401/403 at WARNING,
no dump of response headers."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
from collections.abc import Iterator

import pytest

from kubecoord.cli import logs

CLIENT_ERROR = (
    "(403)\nReason: Forbidden\nHTTP response headers: HTTPHeaderDict({'Audit-Id': 'abc', 'Cache-Control': "
    "'no-cache'})\nHTTP response body: {\"message\":\"leases is forbidden: User u cannot list resource leases\"}"
)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    logs.configure("INFO", "json")
    stream = io.StringIO()
    root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    yield stream
    root.handlers[:], root.level = saved[0], saved[1]


def _records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_time_has_date_and_zone(lines: io.StringIO) -> None:
    logging.getLogger("kubecoord.operator").info("hello")
    (record,) = _records(lines)
    stamp = dt.datetime.fromisoformat(str(record["time"]))
    assert stamp.utcoffset() == dt.timedelta(0) and abs((dt.datetime.now(dt.UTC) - stamp).total_seconds()) < 60


def test_a_403_is_a_warning_without_the_header_dump(lines: io.StringIO) -> None:
    log = logging.getLogger("kubecoord.operator")
    log.info("drift check failed", extra={"resource": "ns/x", "error": CLIENT_ERROR})
    log.info("status write failed", extra={"status_code": 403})
    log.info("cleanup left to the garbage collector", extra={"error": "HTTP 404 Not Found"})
    denied, coded, missing = _records(lines)
    assert denied["level"] == "WARNING" and coded["level"] == "WARNING" and missing["level"] == "INFO"
    assert "Audit-Id" not in str(denied["error"]) and "cannot list resource leases" in str(denied["error"])


def test_tracebacks_lose_the_header_dump_too(lines: io.StringIO) -> None:
    try:
        raise RuntimeError(CLIENT_ERROR)
    except RuntimeError:
        logging.getLogger("kubecoord.operator").exception("reconcile failed")
    (record,) = _records(lines)
    assert "Audit-Id" not in str(record["exc_info"]) and "cannot list resource leases" in str(record["exc_info"])
