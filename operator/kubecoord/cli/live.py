"""A view that redraws in place: the frame of a ``watch`` command.

On a terminal each new frame replaces the previous one (cursor up over the old frame,
erase below, draw), lines cut to the terminal's width so that none wraps and the count
stays right. Elsewhere (a pipe, a file) frames are appended, separated by a blank line,
so a log of them reads top to bottom; JSON frames are one document per line.
"""

from __future__ import annotations

import shutil
from typing import TextIO

CURSOR_UP_LINES = "\x1b[{}F"
"""CSI n F: to the start of the line n lines up."""
ERASE_BELOW = "\x1b[J"


class LiveView:
    def __init__(self, out: TextIO, *, in_place: bool) -> None:
        self._out = out
        self._in_place = in_place
        self._drawn = 0
        self.frames = 0

    def draw(self, lines: list[str]) -> None:
        if self._in_place:
            width = max(20, shutil.get_terminal_size().columns - 1)
            lines = [line[:width] for line in lines]
            if self._drawn:
                self._out.write(CURSOR_UP_LINES.format(self._drawn) + ERASE_BELOW)
            self._drawn = len(lines)
        elif self.frames:
            self._out.write("\n")
        self._out.write("".join(line + "\n" for line in lines))
        self._out.flush()
        self.frames += 1
