"""How results are printed, as kubectl does: ``-o table`` (default: aligned columns for
people, long cells cut), ``-o wide`` (every cell whole), ``-o json`` and ``-o yaml`` (the
whole document, for scripts), ``-o name`` (one name per line: the leader, the members, the
keys, the resources)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

EMPTY = "<none>"


FORMATS = ("table", "wide", "json", "yaml", "name")


def add_output_argument(
    parser: argparse.ArgumentParser, *, extra: Sequence[str] = (), formats: Sequence[str] = FORMATS
) -> None:
    choices = [*formats, *extra]
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        default="table",
        metavar="FORMAT",
        help=f"{', '.join(choices)} (default: table; wide: no cell cut short; name: one name per line)",
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int | None = 60) -> list[str]:
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


def _cell(value: Any, max_width: int | None) -> str:
    if value is None or value == "":
        return EMPTY if value is None else ""
    text = str(value).replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return text if max_width is None or len(text) <= max_width else text[: max_width - 3] + "..."


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None, *, wide: bool = False
) -> None:
    stream = out or sys.stdout
    for line in table(headers, rows, max_width=None if wide else 60):
        print(line, file=stream)


def show(
    output: str,
    document: Any,
    table: tuple[Sequence[str], Sequence[Sequence[Any]]],
    *,
    empty: str | None = None,
    names: Sequence[str] = (),
) -> None:
    """``document`` as JSON or YAML, ``names`` one per line (``-o name``), else ``table``
    (headers, rows; ``wide``: no cell cut) — or the line ``empty`` instead of a table
    without rows, when given."""
    if output == "json":
        print_json(document)
    elif output == "yaml":
        print_yaml(document)
    elif output == "name":
        for name in names:
            print(name)
    elif table[1] or empty is None:
        print_table(*table, wide=output == "wide")
    else:
        print(empty)


def print_yaml(document: Any, out: TextIO | None = None) -> None:
    """The document as YAML (block style, keys sorted, as ``-o json``)."""
    try:
        import yaml  # with the kubernetes extra; imported only for -o yaml
    except ImportError:  # pragma: no cover - every backend extra but zookeeper brings it
        from kubecoord.cli.exits import UsageError

        raise UsageError("-o yaml needs PyYAML (pip install PyYAML); -o json has the same document") from None
    stream = out or sys.stdout
    stream.write(yaml.safe_dump(document, sort_keys=True, allow_unicode=True, default_flow_style=False))
    stream.flush()


def print_json(document: Any, out: TextIO | None = None, *, compact: bool = False) -> None:
    stream = out or sys.stdout
    if compact:
        print(json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True), file=stream)
    else:
        print(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True), file=stream)
    stream.flush()
