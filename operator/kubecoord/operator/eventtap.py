"""A history target that the operator's own coordinators write to, read back as events.

Backends record coordination events (kubecoord.history) as JSON Lines; the operator
hands its coordinators this tap instead of a file, so that it learns what its own
backend handles concluded — in particular which group members *expired* (judged and
reaped by the backend) rather than left. Mirrors subscribe by (primitive, name, event).

Guarantees: write() never raises (a malformed line is dropped and logged at debug);
subscribers are called on the event log's writer thread and must be quick.
Not guaranteed: delivery before the backend's listeners fire (the log is asynchronous);
callers that need the answer wait for it with ``wait_for``.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections import deque

log = logging.getLogger("kubecoord.operator.eventtap")

_REMEMBERED = 10_000


class EventTap(io.TextIOBase):
    def __init__(self) -> None:
        super().__init__()
        self._buffer = ""
        self._cond = threading.Condition()
        self._seen: deque[tuple[str, str, str, str]] = deque(maxlen=_REMEMBERED)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._cond:
            self._buffer += text
            *lines, self._buffer = self._buffer.split("\n")
            for line in lines:
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                    key = (event["primitive"], event["name"], event["event"], str(event.get("member", "")))
                except (ValueError, KeyError, TypeError):
                    log.debug("unreadable event line", extra={"line": line[:200]})
                    continue
                self._seen.append(key)
            self._cond.notify_all()
        return len(text)

    def flush(self) -> None:
        pass

    def wait_for(self, primitive: str, name: str, event: str, member: str, timeout: float) -> bool:
        """Whether the backend recorded this event (waiting up to ``timeout`` s for it)."""
        key = (primitive, name, event, member)
        deadline = time.monotonic() + timeout
        with self._cond:
            while key not in self._seen:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True


tap = EventTap()
"""The operator process's tap, passed as ``history=`` to every coordinator it opens."""
