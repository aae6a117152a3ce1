"""Progress lines on stderr for long work: one line per step, with elapsed seconds.

A listener (e.g. one that names the Spark jobs of each step, so an event log can be read
per step) hears every step, printed or not.

Guarantees: steps may come from several threads (the tables are written side by side);
each line is written whole, never cut by another thread's.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    def __init__(self, prefix: str, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self._prefix = prefix
        self._stream = stream or sys.stderr
        self._enabled = enabled
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self.listener: Callable[[str], None] | None = None

    def step(self, message: str) -> None:
        if self.listener is not None:
            self.listener(message)
        if self._enabled:
            elapsed = time.monotonic() - self._started
            # print() writes the text and the newline in two calls: another thread's line
            # could land between them.
            line = f"{self._prefix}: [{elapsed:7.1f} s] {message}\n"
            with self._lock:
                self._stream.write(line)
                self._stream.flush()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started
