"""Progress lines on stderr for long work: one line per step, with elapsed seconds."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, prefix: str, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self._prefix = prefix
        self._stream = stream or sys.stderr
        self._enabled = enabled
        self._started = time.monotonic()

    def step(self, message: str) -> None:
        if self._enabled:
            elapsed = time.monotonic() - self._started
            print(f"{self._prefix}: [{elapsed:7.1f} s] {message}", file=self._stream, flush=True)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started
