"""Logging set-up for kubecoord's own commands (the library itself only emits records).

Quiet by default: warnings and errors only. Records are structured — one JSON object
per line with the message, the logger, the level and every ``extra=`` field — so that
log collectors can index them; ``text`` format is for people at a terminal.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter


def configure(level: str = "WARNING", fmt: str = "json") -> None:
    """Send kubecoord's log records (and kopf's, pyspark's) to stderr."""
    handler = logging.StreamHandler(sys.stderr)
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
