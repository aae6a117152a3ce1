"""Lines longer than the bound (issue 23): counted malformed with their file and line, never
parsed, and every later line of their file keeps its true number."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from kubecoord.analytics.pipeline import analyze
from kubecoord.analytics.reading import MAX_LINE_BYTES
from kubecoord.errors import InvalidArgumentError
from tests.fixtures.spark import split_small

from .histories import Log, where

BIG = 64 * 2**20


def heartbeats(log: Log, start: int, count: int) -> list[int]:
    return [log.group(float(start + i), "g", "joined" if start + i == 0 else "renewed", "m") for i in range(count)]


def reasons(result: Any) -> list[tuple[str, int, str]]:
    return sorted((r["file"], r["line"], r["reason"]) for r in result.tables["malformed_lines"].collect())


@pytest.mark.timeout(300)
def test_a_64_mib_line_is_malformed_with_its_file_and_line(spark: Any, tmp_path: Path) -> None:
    log = Log(tmp_path / "p.jsonl", "p")
    good = heartbeats(log, 0, 3)
    big = log.raw('{"v":1,"ts":"2026-01-01T00:00:03Z","member":"' + "x" * (BIG - 60) + '"}')
    torn = log.raw("torn {")
    good += heartbeats(log, 3, 3)
    log.write()
    size = len(log.lines[big - 1])
    assert size > MAX_LINE_BYTES

    result = analyze(spark, [str(log.path)])
    try:
        assert reasons(result) == sorted([
            (*where(log, big), f"line of {size} bytes, longer than the bound ({MAX_LINE_BYTES})"),
            (*where(log, torn), "invalid JSON"),
        ])
        assert result.summary["inputs"]["malformed_lines"] == 2
        assert result.summary["inputs"]["events"] == 6
        assert sorted(r["line"] for r in result.events.select("line").collect()) == good
        (example,) = [e for e in result.summary["inputs"]["malformed_examples"] if e["line"] == big]
        assert example["text"].startswith('{"v":1,"ts":"2026-01-01T00:00:03Z","member":"xxx')
        assert len(example["text"]) == 300
    finally:
        result.close()


BOUND = 2048


def _at_the_bound(log: Log) -> tuple[list[int], int, list[int]]:
    """Writes ``log`` with lines at and over BOUND: its good lines, the one at the bound,
    the oversized ones."""
    good = heartbeats(log, 0, 20)
    kept = log.raw("k" * BOUND)  # at the bound: read (and invalid JSON)
    oversized = [log.raw("s" * (BOUND + 1)), log.raw("t" * 9000)]  # over it, across splits
    good += heartbeats(log, 20, 30)
    oversized.append(log.raw("u" * 5000))
    good += heartbeats(log, 50, 10)
    oversized.append(log.raw("v" * (BOUND + 1)))  # the last line, without a newline after it
    text = "\n".join(log.lines)
    if log.path.suffix == ".gz":
        with gzip.open(log.path, "wt") as out:
            out.write(text)
    else:
        log.path.write_text(text)
    return good, kept, oversized


@pytest.fixture(scope="module")
def at_the_bound(
    spark: Any, tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Any, dict[bool, tuple[Log, list[int], int, list[int]]]]]:
    """One analysis of both files (plain and gzip, one process each), files split every
    2 KiB; each file's log and lines by ``compressed``."""
    root = tmp_path_factory.mktemp("at-the-bound")
    files = {}
    for compressed, name in ((False, "plain"), (True, "gzip")):
        log = Log(root / (f"{name}.jsonl.gz" if compressed else f"{name}.jsonl"), name)
        files[compressed] = (log, *_at_the_bound(log))
    with split_small(spark):
        result = analyze(spark, [str(log.path) for log, *_ in files.values()], max_line_bytes=BOUND)
    try:
        yield result, files
    finally:
        result.close()


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_lines_at_the_bound_across_splits_keep_every_line_number(
    at_the_bound: tuple[Any, dict[bool, tuple[Log, list[int], int, list[int]]]], compressed: bool
) -> None:
    result, files = at_the_bound
    log, good, kept, oversized = files[compressed]
    file = where(log, 1)[0]
    lengths = [len(log.lines[n - 1]) for n in oversized]
    assert [r for r in reasons(result) if r[0] == file] == sorted([
        (*where(log, kept), "invalid JSON"),
        *((*where(log, n), f"line of {length} bytes, longer than the bound ({BOUND})")
          for n, length in zip(oversized, lengths, strict=True)),
    ])
    lines = result.events.filter(F.col("file").endswith(f"/{log.path.name}")).select("line").collect()
    assert sorted(r["line"] for r in lines) == good
    # Both files' malformed lines: five each.
    assert result.summary["inputs"]["malformed_lines"] == 5 * len(files)


def test_a_bound_below_a_kibibyte_is_refused_before_reading(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="line bound"):
        analyze(spark, [str(tmp_path / "nothing.jsonl")], max_line_bytes=100)
