"""What every benchmark measures with: percentiles, resident memory and threads, the load."""

from __future__ import annotations

import os
import pathlib
import statistics


def pct(samples: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by nearest rank; NaN without samples."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def ms(samples: list[float]) -> str:
    """"p50 .. ms, p99 .. ms, max .. ms (n=..)" of durations in seconds."""
    return (f"p50 {statistics.median(samples) * 1000:.0f} ms, p99 {pct(samples, 99) * 1000:.0f} ms, "
            f"max {max(samples) * 1000:.0f} ms (n={len(samples)})")


def rss_and_threads(pid: int | None = None) -> tuple[float, int]:
    """Resident memory (MiB) and thread count of process ``pid`` (this one by default)."""
    status = pathlib.Path(f"/proc/{pid or 'self'}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"])


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of process ``pid`` (this one by default) so far."""
    fields = pathlib.Path(f"/proc/{pid or 'self'}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} CPUs"
