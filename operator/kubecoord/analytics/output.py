"""Writing an analysis to any Hadoop path: Parquet tables, summary.json and the report.

``--out`` is a local directory or any URI Hadoop writes (hdfs://, s3a://, abfs://...).
The tables are written by the executors (DataFrame writers); summary.json, report.html
and the plots are made by the driver in a local temporary directory and copied up
through Hadoop's FileSystem, so on a cluster everything lands in one place.

Everything is written into a staging sibling of the output directory, which then
replaces it (a previous output there is removed only after the new one is complete),
so a failed run never leaves a half-written result that looks complete. The final
rename is atomic on local disks and HDFS; on object stores (s3a) a rename is a copy.
The tables are written as the few combined tables of ``layout`` (a ``type`` column says
which in-memory table a row belongs to), side by side (WRITERS at once) while the driver
draws the report. Small tables are written as few files: each table gets one file per
ROWS_PER_FILE events analysed (at least one), not one per shuffle partition: the rows are
repartitioned to that count, not coalesced, since a coalesce runs what computes the
table (e.g. unit holdings' windows) in that many tasks, one at 10M events, which then ran
out of execution memory.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kubecoord.analytics import layout
from kubecoord.analytics.pipeline import Analysis
from kubecoord.analytics.progress import Progress

ROWS_PER_FILE = 5_000_000
WRITERS = 4
"""Tables written at once (each write is a Spark job of its own; layout.WRITTEN has four)."""
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def as_uri(out: str | Path) -> str:
    """A local path (relative or absolute) -> a ``file:`` path for Hadoop; a URI is kept.

    Not percent-encoded: Hadoop's Path encodes what it parses itself, so an encoded
    ``[``, ``]`` or space (``Path.as_uri()``'s ``%5B``) would be encoded twice and the
    output would land in a directory literally named ``out%5B1%5D``."""
    text = str(out)
    if _SCHEME.match(text):
        return text.rstrip("/")
    return f"file:{Path(text).absolute()}"


def display(out: str | Path, name: str) -> str:
    """Where a file of the output is, as the user gave the output."""
    return f"{str(out).rstrip('/')}/{name}"


def write(analysis: Analysis, out: str | Path, *, progress: Progress, spark: SparkSession | None = None) -> None:
    spark = spark or SparkSession.getActiveSession()
    assert spark is not None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop = jvm.org.apache.hadoop.fs
    target = hadoop.Path(as_uri(out))
    fs = target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    parent = target.getParent()
    fs.mkdirs(parent)
    staging = hadoop.Path(parent, f".{target.getName()}.staging-{uuid.uuid4().hex[:12]}")
    files = max(1, min(spark.sparkContext.defaultParallelism,
                       int(analysis.summary["inputs"]["events"]) // ROWS_PER_FILE))
    local = Path(tempfile.mkdtemp(prefix="kubecoord-report-"))
    # matplotlib takes seconds to import: it does so while the executors write the tables.
    importing = threading.Thread(target=importlib.import_module, args=("kubecoord.analytics.report",), daemon=True)
    importing.start()
    def table(name: str, frame: Any) -> None:
        progress.step(f"writing table {name}")  # in this thread: names this thread's Spark jobs
        frame.repartition(files).write.mode("overwrite").parquet(f"{staging.toString()}/tables/{name}")

    try:
        # The tables are independent: their writes (most of them one or two tasks) run side
        # by side, with the report, instead of leaving cores idle between jobs.
        with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="kubecoord-write") as pool:
            writes = [pool.submit(table, name, frame) for name, frame in layout.combine(analysis.tables).items()]
            progress.step("writing report")
            importing.join()
            from kubecoord.analytics import report  # matplotlib only when a report is made

            report.write(analysis, local)
            for done in writes:
                done.result()
        (local / "summary.json").write_text(json.dumps(analysis.summary, indent=2, default=str) + "\n")
        for path in sorted(local.iterdir()):
            fs.copyFromLocalFile(False, True, hadoop.Path(as_uri(path)), hadoop.Path(staging, path.name))
        _replace(fs, hadoop, staging, target)
    except BaseException:
        fs.delete(staging, True)
        raise
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _replace(fs: Any, hadoop: Any, staging: Any, target: Any) -> None:
    if fs.exists(target):
        old = hadoop.Path(target.getParent(), f".{target.getName()}.old-{uuid.uuid4().hex[:12]}")
        if not fs.rename(target, old):
            raise OSError(f"could not move the previous output {target.toString()} aside")
        if not fs.rename(staging, target):
            fs.rename(old, target)
            raise OSError(f"could not move the new output into {target.toString()}")
        fs.delete(old, True)
    elif not fs.rename(staging, target):
        raise OSError(f"could not move the new output into {target.toString()}")
