"""The coordination event log: JSON Lines that the analytics pipeline reads.

Usage::

    coord = kubecoord.connect("memory://demo", history="/var/log/kubecoord.jsonl")
    # or: KUBECOORD_HISTORY=/var/log/kubecoord.jsonl

One event per line (schema version 1, kubecoord.wire.events; the table is in docs/pipeline.md): ``v``, ``ts`` (RFC
3339 UTC with microseconds, the emitter's wall clock), ``seq`` (per-process sequence
number from 1), ``source``, ``process``, ``backend``, ``namespace``, ``primitive``,
``name``, ``event`` and, where relevant, ``member``, ``epoch``, ``valid_until``, ``key``,
``version``, and ``mono``: the emitter's monotonic clock (seconds) at ``ts``, which the
pipeline uses to place a process's events even when its wall clock was stepped (record()
stamps it when it stamps ``ts``; a caller that passes its own ``ts`` passes ``mono`` too,
or none). Fields whose value is None are left out.

Guarantees: record() never blocks on disk I/O and never raises for I/O reasons — it
stamps the event and hands it to a bounded queue; a writer thread formats and appends
it. A full queue, a full disk, a missing directory or a closed file never breaks
coordination: the events are dropped, counted in ``dropped`` and logged (once per kind
of failure). Lines are written whole: a batch is formatted before it is written.
Not guaranteed: that events reach the disk if the process is killed with -9 (what is
still queued is lost), nor ordering between processes (the pipeline sorts by ``ts`` and
tolerates skew).
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

from kubecoord.wire.events import SCHEMA_VERSION, TIME_FIELDS, Source

log = logging.getLogger("kubecoord.history")

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

    def record(self, *, primitive: str, name: str, event: str, ts: float | None = None, **fields: Any) -> None:
        """Record one event at ``ts`` (UNIX seconds, default now); None-valued fields are left out."""

    def close(self) -> None:
        """Flush and stop. Idempotent."""


class JsonlEventLog(EventLog):
    """Appends events as JSON Lines to a path or a writable text file object.

    A path is opened (O_APPEND, unbuffered) by the writer thread on first use and
    closed by close(); a file object given by the caller is flushed after every batch
    but never closed.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[str],
        *,
        source: str = Source.CLIENT,
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
        self._fd: int | None = None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queued)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = False
        self._warned: set[str] = set()
        self.dropped = 0
        self._thread = threading.Thread(target=self._write_loop, name="kubecoord-history", daemon=True)
        self._thread.start()

    def record(self, *, primitive: str, name: str, event: str, ts: float | None = None, **fields: Any) -> None:
        # Only stamping happens here; formatting and I/O belong to the writer thread.
        if ts is None:
            ts = time.time()
            fields.setdefault("mono", time.monotonic())
        stamped = (ts, next(self._seq), primitive, name, event, fields)
        if self._closed:
            self._drop("closed", "event log closed")
            return
        try:
            self._queue.put_nowait(stamped)
        except queue.Full:
            self._drop("queue", "event queue full")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # A full queue means the writer is busy draining it; it sees _closed afterwards.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_STOP)
        self._thread.join(10)

    def _drop(self, kind: str, reason: str, count: int = 1) -> None:
        with self._lock:
            self.dropped += count
            first = kind not in self._warned
            self._warned.add(kind)
        if first:
            log.warning("history events dropped", extra={"reason": reason, "dropped": count})

    def _format(self, stamped: tuple[float, int, str, str, str, dict[str, Any]]) -> str:
        ts, seq, primitive, name, event, fields = stamped
        line: dict[str, Any] = {"v": SCHEMA_VERSION, "ts": rfc3339(ts), "seq": seq, **self._base}
        line.update(primitive=primitive, name=name, event=event)
        for field, value in fields.items():
            if value is not None:
                line[field] = rfc3339(value) if field in TIME_FIELDS else round(value, 6) if field == "mono" else value
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"

    def _write_loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while len(batch) < 10_000:
                    batch.append(self._queue.get_nowait())
            stopping = any(item is _STOP for item in batch)
            events = [item for item in batch if item is not _STOP]
            if events:
                self._write(events)
            if stopping or (self._closed and self._queue.empty()):
                break
        leftover = 0
        with contextlib.suppress(queue.Empty):
            while True:
                leftover += self._queue.get_nowait() is not _STOP
        if leftover:
            self._drop("closed", "event log closed", leftover)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def _write(self, events: list[Any]) -> None:
        try:
            text = "".join(self._format(event) for event in events)
            if self._owns_file:
                self._append(text.encode("utf-8"))
            else:
                self._target.write(text)  # type: ignore[union-attr]
                self._target.flush()  # type: ignore[union-attr]
        except (OSError, ValueError) as exc:  # full disk, closed file, missing directory
            self._drop("write", f"write failed: {exc}", len(events))

    def _append(self, data: bytes) -> None:
        # An unbuffered O_APPEND descriptor: nothing of a failed batch lingers in a
        # buffer to be flushed later. A disk that fills mid-batch can still leave one
        # torn last line, which the pipeline counts as malformed.
        if self._fd is None:
            self._fd = os.open(self._target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # type: ignore[arg-type]
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]


def open_event_log(
    target: HistoryTarget, *, backend: str, namespace: str, source: str = Source.CLIENT, process: str | None = None
) -> EventLog:
    """The event log connect() gives a coordinator: ``target``, else $KUBECOORD_HISTORY, else none."""
    if target is None:
        target = os.environ.get(ENV_VAR) or None
    if target is None:
        return EventLog()
    return JsonlEventLog(target, source=source, backend=backend, namespace=namespace, process=process)
