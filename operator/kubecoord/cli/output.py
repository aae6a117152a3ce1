"""How results are printed: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

EMPTY = "<none>"


def add_output_argument(parser: argparse.ArgumentParser, *, extra: Sequence[str] = ()) -> None:
    choices = ["table", "json", *extra]
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        default="table",
        help="table (for people, default) or json (one document; one per line for watch)"
        + ("" if not extra else "; " + ", ".join(extra)),
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int = 60) -> list[str]:
    """Lines of a kubectl-style table: upper-case headers, columns separated by 3 spaces.

    Cells are shown whole up to ``max_width`` characters, then cut with '...'; newlines
    and tabs are shown escaped so that one row stays one line.
    """
    cells = [[_cell(value, max_width) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    lines = []
    for row in [list(headers), *cells]:
        lines.append("   ".join(cell.ljust(widths[index]) for index, cell in enumerate(row)).rstrip())
    return lines


def _cell(value: Any, max_width: int) -> str:
    if value is None or value == "":
        return EMPTY if value is None else ""
    text = str(value).replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return text if len(text) <= max_width else text[: max_width - 3] + "..."


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    for line in table(headers, rows):
        print(line, file=stream)


def show(
    output: str, document: Any, table: tuple[Sequence[str], Sequence[Sequence[Any]]], *, empty: str | None = None
) -> None:
    """``document`` as JSON when ``output`` is "json", else ``table`` (headers, rows) — or
    the line ``empty`` instead of a table without rows, when given."""
    if output == "json":
        print_json(document)
    elif table[1] or empty is None:
        print_table(*table)
    else:
        print(empty)


def print_json(document: Any, out: TextIO | None = None, *, compact: bool = False) -> None:
    stream = out or sys.stdout
    if compact:
        print(json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True), file=stream)
    else:
        print(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True), file=stream)
    stream.flush()
