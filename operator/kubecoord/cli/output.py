"""How results are printed, as kubectl does: ``-o table`` (default: aligned columns for
people, long cells cut), ``-o wide`` (more columns where a command has them, and every cell
whole), ``-o json`` and ``-o yaml`` (the whole document, for scripts), ``-o name`` (one
KIND/NAME per row: ``leaderelection/billing``, ``member/w1``, ``key/orders/config``,
``holder/pod-a``; ``status`` names its resources as kubectl does,
``leaderelection.kubecoord.dev/billing``), ``-o jsonpath=TEMPLATE`` (kubectl's templates
over the JSON document: cli/jsonpath.py)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

EMPTY = "<none>"
JSONPATH = "jsonpath="


FORMATS = ("table", "wide", "json", "yaml", "name", JSONPATH)


class Formats(tuple[str, ...]):
    """The choices of ``-o``: a plain name, or ``jsonpath=TEMPLATE`` when JSONPATH is one of them
    (argparse checks membership; completion and its error message list them)."""

    def __contains__(self, value: object) -> bool:
        if isinstance(value, str) and value.startswith(JSONPATH):
            return JSONPATH in tuple(self)
        return value in tuple(self)


def _output_format(value: str) -> str:
    """``-o``'s value, a JSONPath template compiled here: a malformed one is exit 2 before
    any request."""
    if value.startswith(JSONPATH):
        from kubecoord.cli.jsonpath import TemplateError, compile_template  # only for -o jsonpath

        try:
            compile_template(value[len(JSONPATH) :])
        except TemplateError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return value


def add_output_argument(
    parser: argparse.ArgumentParser, *, extra: Sequence[str] = (), formats: Sequence[str] = FORMATS
) -> None:
    choices = Formats([*formats, *extra])
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        type=_output_format,
        default="table",
        metavar="FORMAT",
        help=f"{', '.join(c + 'TEMPLATE' if c == JSONPATH else c for c in choices)} (default: table; wide: more "
        "columns, no cell cut short; name: KIND/NAME per row; jsonpath: kubectl's, e.g. jsonpath={.leader})",
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


Table = tuple[Sequence[str], Sequence[Sequence[Any]]]


def show(
    output: str,
    document: Any,
    table: Table,
    *,
    empty: str | None = None,
    kind: str = "",
    names: Sequence[str] = (),
    wide: Table | None = None,
) -> None:
    """``document`` as JSON, YAML or through a JSONPath template, ``KIND/NAME`` per name
    (``-o name``; ``kind`` empty: the names are whole), else ``table`` (headers, rows), or
    with ``-o wide`` the ``wide`` table when given (more columns; no cell cut either way) —
    or the line ``empty`` instead of a table without rows, when given."""
    if output == "json":
        print_json(document)
    elif output == "yaml":
        print_yaml(document)
    elif output.startswith(JSONPATH):
        print_jsonpath(output[len(JSONPATH) :], document)
    elif output == "name":
        for name in names:
            print(f"{kind}/{name}" if kind else name)
    elif table[1] or empty is None:
        print_table(*(wide if output == "wide" and wide is not None else table), wide=output == "wide")
    else:
        print(empty)


def print_jsonpath(template: str, document: Any, out: TextIO | None = None) -> None:
    """The document through kubectl's JSONPath ``template`` (no newline added, as kubectl)."""
    from kubecoord.cli.jsonpath import compile_template

    stream = out or sys.stdout
    stream.write(compile_template(template).render(json.loads(json.dumps(document))))
    stream.flush()


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
