"""Frozen verdicts: an analysis (summary.json and every table) as plain data that can be
compared with a golden copy taken from an earlier version of the pipeline.

The pipeline's rewrite (issue 23) must give the same summary and the same tables on every
test history; the golden files under ``golden/`` were taken from the pipeline before it.

Normalised so that only what the pipeline decides is compared: file URIs lose the
temporary directory they were written under (``<root>/p1.jsonl``), rows of a table are
sorted (a table's row order is not guaranteed), floats are rounded to 6 decimals
(microseconds: the resolution of every timestamp in a log), timestamps are ISO text.
A table of more than FULL_ROWS rows is kept as its row count, a digest of all its rows and
its first rows, so the golden files stay small enough to read in a diff.

As a script, for histories too large for the repository (the 1M-event history):

    python -m tests.analytics.golden capture OUT_DIR LOG_ROOT GOLDEN.json
    python -m tests.analytics.golden compare OUT_DIR LOG_ROOT GOLDEN.json
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FULL_ROWS = 300
SHOWN_ROWS = 20
GOLDEN = Path(__file__).with_name("golden")


def root_uris(root: Path | str) -> list[str]:
    path = str(Path(root).absolute()).rstrip("/")
    return [f"file://{path}", f"file:{path}", path]


def normalise(value: Any, roots: list[str]) -> Any:
    """Plain JSON data: rows to dicts, times to ISO text, floats rounded, the log root cut."""
    if hasattr(value, "asDict"):
        value = value.asDict(recursive=True)
    if isinstance(value, Mapping):
        return {str(k): normalise(v, roots) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalise(v, roots) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float | decimal.Decimal):
        return round(float(value), 6)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, str):
        for root in roots:
            value = value.replace(root, "<root>")
        return value
    return repr(value)


def table(rows: list[Any], roots: list[str]) -> dict[str, Any]:
    plain = sorted(json.dumps(normalise(r, roots), sort_keys=True) for r in rows)
    if len(plain) <= FULL_ROWS:
        return {"count": len(plain), "rows": [json.loads(r) for r in plain]}
    digest = hashlib.sha256("\n".join(plain).encode()).hexdigest()
    return {"count": len(plain), "sha256": digest, "first_rows": [json.loads(r) for r in plain[:SHOWN_ROWS]]}


def snapshot_analysis(analysis: Any, root: Path | str) -> dict[str, Any]:
    """An in-memory Analysis (pipeline.analyze's result) as plain data."""
    roots = root_uris(root)
    return {
        "summary": normalise(json.loads(json.dumps(analysis.summary, default=str)), roots),
        "tables": {name: table(frame.collect(), roots) for name, frame in sorted(analysis.tables.items())},
    }


def snapshot_output(spark: Any, out: Path, root: Path | str) -> dict[str, Any]:
    """A written output directory (summary.json and tables/*) as plain data."""
    from kubecoord.analytics import layout

    roots = root_uris(root)
    # The written tables are layout's combined ones: each in-memory table is recovered by its
    # type, so the golden copies (taken when every table was written on its own) still apply.
    tables = layout.read(spark, str(out.absolute() / "tables"))
    return {
        "summary": normalise(json.loads((out / "summary.json").read_text()), roots),
        "tables": {name: table(frame.collect(), roots) for name, frame in sorted(tables.items())},
    }


def differences(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Where two snapshots differ, as readable lines (empty when identical)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            if key not in actual:
                found.append(f"{where}/{key}: missing")
            elif key not in expected:
                found.append(f"{where}/{key}: unexpected {json.dumps(actual[key])[:300]}")
            else:
                found += differences(expected[key], actual[key], f"{where}/{key}")
        return found
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [line for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for line in differences(e, a, f"{where}[{i}]")]
    if expected != actual:
        return [f"{where}: expected {json.dumps(expected)[:300]}, got {json.dumps(actual)[:300]}"]
    return []


def check(name: str, snapshot: dict[str, Any]) -> None:
    """Assert ``snapshot`` equals golden/NAME.json (written instead when KUBECOORD_GOLDEN=write)."""
    import os

    path = GOLDEN / f"{name}.json"
    if os.environ.get("KUBECOORD_GOLDEN") == "write":
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
        return
    expected = json.loads(path.read_text())
    found = differences(expected, snapshot)
    assert not found, f"{len(found)} difference(s) from {path.name}:\n" + "\n".join(found[:40])


def main(argv: list[str]) -> int:
    from kubecoord.analytics.session import build_session

    if len(argv) != 4 or argv[0] not in ("capture", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    command, out, root, golden = argv[0], Path(argv[1]), argv[2], Path(argv[3])
    spark = build_session(master="local[2]", app_name="kubecoord-golden")
    try:
        snapshot = snapshot_output(spark, out, root)
    finally:
        spark.stop()
    if command == "capture":
        golden.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
        print(f"golden written: {golden}")
        return 0
    found = differences(json.loads(golden.read_text()), snapshot)
    print("\n".join(found[:100]) if found else "identical")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
