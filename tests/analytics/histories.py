"""Hand-written event logs for the pipeline tests: every line's number is known."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kubecoord.analytics.pipeline import Analysis, analyze
from kubecoord.history import rfc3339
from kubecoord.wire.events import SCHEMA_VERSION

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class Log:
    """One process's log file. add() returns the 1-based line number of the event."""

    def __init__(
        self, path: Path, process: str, *, namespace: str = "ns", clock_offset: float = 0.0,
        backend: str = "kubernetes", monotonic: float | None = None, source: str = "client",
    ) -> None:
        self.path = path
        self.source = source
        self.monotonic = monotonic
        """When set, every event carries ``mono``: true time + this (a monotonic clock no step moves)."""
        self.backend = backend
        self.process = process
        self.namespace = namespace
        self.clock_offset = clock_offset
        self.lines: list[str] = []
        self._seq = 0

    def add(self, t: float, primitive: str, name: str, event: str, **fields: Any) -> int:
        self._seq += 1
        line: dict[str, Any] = {
            "v": SCHEMA_VERSION, "ts": rfc3339(T0 + t + self.clock_offset), "seq": self._seq, "source": self.source,
            "process": self.process, "backend": self.backend, "namespace": self.namespace,
            "primitive": primitive, "name": name, "event": event,
        }
        if self.monotonic is not None:
            line["mono"] = round(t + self.monotonic, 6)
        for key, value in fields.items():
            line[key] = rfc3339(T0 + value + self.clock_offset) if key in ("valid_until", "sent") else value
        return self.raw(json.dumps(line))

    def leader(self, t: float, name: str, event: str, member: str, epoch: int, valid_until: float | None = None) -> int:
        fields: dict[str, Any] = {"member": member, "epoch": epoch}
        if valid_until is not None:
            fields["valid_until"] = valid_until
        return self.add(t, "leader_election", name, event, **fields)

    def group(self, t: float, name: str, event: str, member: str) -> int:
        return self.add(t, "group", name, event, member=member)

    def kv(self, t: float, name: str, event: str, key: str, version: int | None) -> int:
        return self.add(t, "kv", name, event, key=key, version=version)

    def skip(self, count: int) -> None:
        """Lose the next ``count`` events (a gap in seq, as dropped events leave)."""
        self._seq += count

    def raw(self, text: str) -> int:
        self.lines.append(text)
        return len(self.lines)

    def write(self, *, reverse: bool = False) -> Path:
        """Write the file; ``reverse`` writes the lines last-first (out of order), keeping
        the numbers add() returned valid by counting from the end."""
        lines = list(reversed(self.lines)) if reverse else self.lines
        text = "".join(line + "\n" for line in lines)
        if self.path.suffix == ".gz":
            with gzip.open(self.path, "wt", encoding="utf-8") as out:
                out.write(text)
        else:
            self.path.write_text(text, encoding="utf-8")
        return self.path


def where(log: Log, line: int, *, reversed_file: bool = False) -> tuple[str, int]:
    """(file URI, line number) as the pipeline reports them."""
    number = len(log.lines) + 1 - line if reversed_file else line
    return log.path.as_uri().replace("file:///", "file:/"), number


def analyzed(spark: Any, root: Path, logs: Iterable[Log], *, skew: float) -> Iterator[Analysis]:
    """For a module fixture (``yield from analyzed(...)``): ``logs`` written, every
    ``*.jsonl`` of ``root`` analyzed with clock tolerance ``skew``, the analysis closed at
    the module's end."""
    for each in logs:
        each.write()
    result = analyze(spark, [str(root / "*.jsonl")], skew=skew)
    try:
        yield result
    finally:
        result.close()
