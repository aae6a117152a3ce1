"""Writing an analysis: Parquet tables, summary.json and the report, all or nothing.

Everything is written into a temporary sibling of the output directory, which then
replaces it (a previous output there is removed only after the new one is complete),
so a failed run never leaves a half-written result that looks complete.
``--out`` is a local directory: the report and plots are written by the driver.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from kubecoord.analytics.pipeline import Analysis
from kubecoord.analytics.progress import Progress


def write(analysis: Analysis, out: Path, *, progress: Progress) -> None:
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, frame in analysis.tables.items():
            progress.step(f"writing table {name}")
            frame.write.mode("overwrite").parquet((staging / "tables" / name).as_uri())
        progress.step("writing report")
        from kubecoord.analytics import report  # matplotlib only when a report is made

        report.write(analysis, staging)
        (staging / "summary.json").write_text(json.dumps(analysis.summary, indent=2, default=str) + "\n")
        _replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _replace(staging: Path, out: Path) -> None:
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        staging.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(out)
    out.chmod(0o755)
