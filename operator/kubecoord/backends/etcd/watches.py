"""PrefixView: every key under one prefix, kept current by a watch (client-go's reflector,
for etcd): read the range once, then watch from the revision after it; a broken or idle
stream is resumed from the last revision seen, so no event is missed or applied twice;
a compacted revision means the range is read again.

Each view runs on a thread of its own and calls ``changed(view)`` (on that thread, never under
its lock) after every batch it applied. ``wait_for(revision)`` blocks until the view
includes every change up to ``revision`` (a write of this process, say).

Guarantees: the view only ever moves forward in revision; what it shows existed at its
``revision``. Not guaranteed: how late it is (a watch stream stalled by the network is
noticed within ``read_timeout`` and resumed).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubecoord.backends.etcd.transport import GatewayError, Transport, b64, prefix_end, stream_lines, unb64
from kubecoord.errors import CoordinationError

log = logging.getLogger("kubecoord.etcd")


@dataclass(frozen=True, slots=True)
class Entry:
    """One key as etcd reports it."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def of(cls, kv: dict[str, Any]) -> Entry:
        return cls(
            unb64(kv.get("key")).decode(), unb64(kv.get("value")), int(kv.get("create_revision", 0)),
            int(kv.get("mod_revision", 0)), int(kv.get("version", 0)), int(kv.get("lease", 0)),
        )


def _shut_down(response: Any) -> None:
    connection = getattr(getattr(response, "raw", None), "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def read_prefix(transport: Transport, prefix: str, **extra: Any) -> tuple[dict[str, Entry], int]:
    """Every key under ``prefix`` now, and the revision of the read."""
    body = {"key": b64(prefix), "range_end": prefix_end(prefix), **extra}
    answer = transport.call("kv/range", body, idempotent=True)
    entries = {entry.key: entry for entry in map(Entry.of, answer.get("kvs", []))}
    return entries, int(answer["header"]["revision"])


class PrefixView:
    def __init__(
        self, transport: Transport, prefix: str, changed: Callable[[PrefixView], None], *,
        read_timeout: float, name: str,
    ) -> None:
        self._transport = transport
        self._prefix = prefix
        self._changed = changed
        self._read_timeout = read_timeout
        self._cond = threading.Condition()
        self._entries: dict[str, Entry] = {}
        self.revision = 0
        self._stopped = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"kubecoord-etcd-watch-{name}", daemon=True)
        self._thread.start()

    def entries(self) -> dict[str, Entry]:
        with self._cond:
            return dict(self._entries)

    def wait_for(self, revision: int, timeout: float) -> bool:
        """Whether the view reached ``revision`` within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self.revision >= revision or self._stopped.is_set(), timeout) and (
                self.revision >= revision
            )

    def stop(self) -> None:
        """Stop at once: the stream's socket is shut down, so the reading thread's blocked
        read returns now (closing the response from here would wait for that read)."""
        self._stopped.set()
        _shut_down(self._response)
        with self._cond:
            self._cond.notify_all()

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        synced = False
        while not self._stopped.is_set():
            try:
                if not synced:
                    entries, revision = read_prefix(self._transport, self._prefix)
                    with self._cond:
                        self._entries, self.revision = entries, max(self.revision, revision)
                        self._cond.notify_all()
                    self._emit()
                    synced = True
                synced = self._watch()
            except (CoordinationError, GatewayError, OSError, ValueError) as exc:
                log.debug("etcd watch interrupted", extra={"prefix": self._prefix, "error": str(exc)})
                self._stopped.wait(0.2)
            except Exception as exc:  # requests' streaming errors (reset, read timeout): resume
                log.debug("etcd watch stream ended", extra={"prefix": self._prefix, "error": repr(exc)})
                self._stopped.wait(0.05)

    def _watch(self) -> bool:
        """Stream events from the revision after the view's; False when the range must be read
        again (compaction), True when the stream merely ended."""
        body = {"create_request": {
            "key": b64(self._prefix), "range_end": prefix_end(self._prefix), "start_revision": self.revision + 1,
            "progress_notify": True,
        }}
        response = self._transport.open_stream("watch", body, read_timeout=self._read_timeout)
        self._response = response
        try:
            if self._stopped.is_set():
                return True
            for message in stream_lines(response):
                result = message.get("result", {})
                if "error" in message:
                    raise GatewayError(int(message["error"].get("code", 2)), str(message["error"].get("message")))
                if int(result.get("compact_revision", 0) or 0) > 0:
                    return False
                if result.get("canceled"):
                    return True
                events = result.get("events", [])
                if not events:
                    if not result.get("created"):  # a progress notification: everything up to it was sent
                        self._advance(int(result.get("header", {}).get("revision", 0)))
                    continue
                with self._cond:
                    for event in events:
                        entry = Entry.of(event["kv"])
                        if event.get("type") == "DELETE":
                            self._entries.pop(entry.key, None)
                        else:
                            self._entries[entry.key] = entry
                        self.revision = max(self.revision, entry.mod_revision)
                    self._cond.notify_all()
                self._emit()
            return True
        finally:
            self._response = None
            response.close()

    def _advance(self, revision: int) -> None:
        with self._cond:
            if revision > self.revision:
                self.revision = revision
                self._cond.notify_all()

    def _emit(self) -> None:
        if self._stopped.is_set():
            return
        try:
            self._changed(self)
        except Exception:
            log.exception("etcd view consumer failed", extra={"prefix": self._prefix})
