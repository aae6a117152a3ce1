"""The coordination event log: JSON Lines that the analytics pipeline reads.

Usage::

    coord = kubecoord.connect("memory://demo", history="/var/log/kubecoord.jsonl")
    # or: KUBECOORD_HISTORY=/var/log/kubecoord.jsonl

One event per line (schema version 1, see the README): ``v``, ``ts`` (RFC 3339 UTC with
microseconds, the emitter's wall clock), ``seq`` (per-process sequence number),
``source``, ``process``, ``backend``, ``namespace``, ``primitive``, ``name``, ``event``
and, where relevant, ``member``, ``epoch``, ``valid_until``, ``key``, ``version``.

Guarantees: record() never blocks on disk I/O — events go through a bounded queue to a
writer thread — and a full queue, a full disk or a closed file never breaks
coordination: the events are dropped, counted in ``dropped`` and logged once.
Not guaranteed: that events reach the disk if the process is killed with -9.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import logging
import os
import queue
import socket
import threading
import time
from typing import IO, Any

log = logging.getLogger("kubecoord.history")

SCHEMA_VERSION = 1
ENV_VAR = "KUBECOORD_HISTORY"

HistoryTarget = str | os.PathLike[str] | IO[str] | None
"""A path or a writable text file object; None means $KUBECOORD_HISTORY or nothing."""
_STOP = object()


def rfc3339(timestamp: float) -> str:
    """UNIX seconds -> RFC 3339 UTC with microseconds, e.g. 2026-11-22T21:47:03.123456Z."""
    moment = dt.datetime.fromtimestamp(timestamp, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_process() -> str:
    """Pod name when running in Kubernetes (HOSTNAME), else host:pid."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("HOSTNAME"):
        return os.environ["HOSTNAME"]
    return f"{socket.gethostname()}:{os.getpid()}"


class EventLog:
    """Where a coordinator records its events. The base class records nothing."""

    dropped: int = 0

    def record(self, *, primitive: str, name: str, event: str, **fields: Any) -> None:
        """Record one event; fields with value None are left out."""

    def close(self) -> None:
        """Flush and stop. Idempotent."""


class JsonlEventLog(EventLog):
    """Appends events as JSON Lines to a path or a writable text file object."""

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[str],
        *,
        source: str = "client",
        backend: str,
        namespace: str,
        process: str | None = None,
        max_queued: int = 100_000,
    ) -> None:
        self._base = {
            "v": SCHEMA_VERSION,
            "source": source,
            "process": process or default_process(),
            "backend": backend,
            "namespace": namespace,
        }
        self._owns_file = not hasattr(target, "write")
        self._target = target
        self._file: IO[str] | None = None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queued)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._write_loop, name="kubecoord-history", daemon=True)
        self._thread.start()

    def record(self, *, primitive: str, name: str, event: str, **fields: Any) -> None:
        line: dict[str, Any] = {"ts": rfc3339(time.time()), "seq": next(self._seq), **self._base}
        line.update(primitive=primitive, name=name, event=event)
        for field, value in fields.items():
            if value is None:
                continue
            line[field] = rfc3339(value) if field == "valid_until" else value
        if self._closed:
            self._drop("event log closed")
            return
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            self._drop("event queue full")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._queue.put(_STOP)
        self._thread.join(10)

    def _drop(self, reason: str, count: int = 1) -> None:
        with self._lock:
            first = self.dropped == 0
            self.dropped += count
        if first:
            log.warning("history events dropped", extra={"reason": reason})

    def _open(self) -> IO[str]:
        if self._file is None:
            if self._owns_file:
                self._file = open(self._target, "a", encoding="utf-8")  # type: ignore[arg-type]  # noqa: SIM115
            else:
                self._file = self._target  # type: ignore[assignment]
        assert self._file is not None
        return self._file

    def _write_loop(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if _STOP in batch:
                stopping = True
                batch = [item for item in batch if item is not _STOP]
            if batch:
                self._write(batch)
        if self._owns_file and self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()

    def _write(self, batch: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in batch)
        try:
            out = self._open()
            out.write(text)
            out.flush()
        except (OSError, ValueError) as exc:  # full disk, closed file: count, never raise
            self._drop(f"write failed: {exc}", len(batch))


def open_event_log(
    target: HistoryTarget, *, backend: str, namespace: str, source: str = "client"
) -> EventLog:
    """The event log connect() gives a coordinator: ``target``, else $KUBECOORD_HISTORY, else none."""
    if target is None:
        target = os.environ.get(ENV_VAR) or None
    if target is None:
        return EventLog()
    return JsonlEventLog(target, source=source, backend=backend, namespace=namespace)
