"""Faults injected while a history was logged (a soak's ``faults.jsonl``), for the report.

Each line: ``ts`` (UNIX seconds when the fault began, the injector's clock), ``kind``
(the soak's fault kind, e.g. ``kill9_leader``, ``sigstop_pause``, ``proxy_hold``),
``duration`` (seconds it lasted; 0 for an instant fault such as a kill) and ``what`` (the
target, as text). They are drawn on the report's timelines so that a failover gap or a
violation can be read against the fault before it; the checks never use them.

Guaranteed: a file that is not such JSON Lines is refused (InvalidArgumentError naming
the file and line) before Spark starts. Local files only. Not guaranteed: the
injector's clock is not corrected by the log's clock offsets (on one host it is the
same clock as the emitters').
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubecoord.errors import InvalidArgumentError

CATEGORIES = (("kill", "kill"), ("pause", "pause"), ("sigstop", "pause"), ("proxy", "partition"),
              ("partition", "partition"), ("restart", "restart"), ("delete", "deletion"), ("clock", "clock"))
"""Fault kind substring -> the category the report colours it by (first match wins)."""


def category(kind: str) -> str:
    return next((name for part, name in CATEGORIES if part in kind), "other")


def read_faults(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Every fault of the files, by start time: ts, kind, duration, what, category."""
    found: list[dict[str, Any]] = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read the faults file {path}: {exc}") from None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                kind = str(entry["kind"])
                fault: dict[str, Any] = {"ts": float(entry["ts"]), "kind": kind,
                         "duration": max(0.0, float(entry.get("duration") or 0.0)), "what": str(entry.get("what", ""))}
            except (ValueError, KeyError, TypeError) as exc:
                raise InvalidArgumentError(f"{path}:{number}: not a fault record ({exc})") from None
            fault["category"] = category(kind)
            found.append(fault)
    return sorted(found, key=lambda f: f["ts"])
