"""Logging set-up for kubecoord's own commands (the library itself only emits records).

Quiet by default: warnings and errors only. Records are structured — one JSON object
per line with the message, the logger, the level and every ``extra=`` field — so that
log collectors can index them; ``text`` format is for people at a terminal.

kopf's per-object records carry its whole OperatorSettings (``settings``), a flag
(``k8s_skip``) and the object reference (``k8s_ref``) as attributes: the settings are
dropped (a dump of every setting on every line helps nobody), the reference becomes one
``object`` field ("Kind namespace/name"), as kopf's own JSON formatter does.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

EXPECTED_KOPF_WARNINGS = frozenset({
    # kubecoord runs kopf in a thread of its own and handles SIGTERM itself (operator/ha.py).
    "OS signals are ignored: running not in the main thread.",
})
"""kopf warnings that are normal operation for kubecoord's operator: logged at INFO."""


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
        handler.setFormatter(
            JsonFormatter(
                "{asctime}{levelname}{name}{message}",
                style="{",
                rename_fields={"levelname": "level"},
                # str() rather than the library's dataclass expansion, which deep-copies
                # kopf's records and fails on the queues inside them.
                json_default=str,
            )
        )
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
