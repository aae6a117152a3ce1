"""Fenced code blocks of the Markdown pages, with the directives written before them.

A block "claims to run" when it is ``bash``, or ``python`` that is a whole program (it
imports kubecoord; a fragment that uses a ``coord`` from elsewhere is an illustration);
every such block is run by a test (tests/docs/), unless an HTML comment right before it
says why not:

    <!-- not run: REASON -->      never run (REASON must say why, e.g. "needs Docker")
    <!-- output -->               (before a ``text`` block) what the python block before it
                                  prints, compared line by line, order aside
    <!-- background -->           (getting started) runs on while the page goes on

A ``python`` block with ``title="FILE"`` is a file the page asks the reader to save.
"""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass, field

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)(?P<attrs>[^\n`]*)$")
DIRECTIVE = re.compile(r"^<!--\s*(?P<name>not run|output|background)\s*(?::\s*(?P<value>.*?))?\s*-->$")
RUNS = {"python", "bash"}


@dataclass
class Block:
    path: pathlib.Path
    line: int
    lang: str
    code: str
    title: str | None = None
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def claims_to_run(self) -> bool:
        if self.lang not in RUNS or "not run" in self.directives:
            return False
        return self.lang == "bash" or self.title is not None or bool(
            re.search(r"^(import|from) kubecoord\b", self.code, re.M))

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: pathlib.Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    directives: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = DIRECTIVE.match(line.strip())
        if directive:
            directives[directive["name"]] = (directive["value"] or "").strip()
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:
            indent = len(fence["indent"])
            title = re.search(r'title="([^"]+)"', fence["attrs"])
            start = i + 1
            i += 1
            body = []
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i][indent:])
                i += 1
            found.append(Block(path, start, fence["lang"], "\n".join(body) + "\n",
                               title[1] if title else None, directives))
            directives = {}
        elif line.strip():
            directives = {}
        i += 1
    return found
