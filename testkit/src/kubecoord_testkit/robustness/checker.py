"""Running the judge: ``kubecoord-porcupine``, a small Go program over Porcupine
(github.com/anishathalye/porcupine v1.3.1, pinned by ``testkit/porcupine/go.mod`` and
``go.sum``), built by ``make porcupine`` into the venv's bin folder when Go is present.

The program's models are in ``testkit/porcupine/models.go``: a versioned compare-and-set
register per key (get -> value and version, or absent; create-only put; update with or
without an expected version; delete with or without one; each ok, a definite failure,
refused — not applied, a plain BackendUnavailableError — or unknown) and a lock/semaphore
model (at most max_holders holders, one per slot; each slot's fencing tokens strictly
increasing; a hold lasts from acquire's return to the last moment its holder claimed it).
On a violation it writes the history and Porcupine's HTML
visualisations to the output folder and prints the smallest failing window.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BINARY = "kubecoord-porcupine"
ENVIRONMENT = "KUBECOORD_PORCUPINE"
"""A path to the checker binary, instead of the one beside this Python."""


def find_checker() -> Path | None:
    """The checker binary: $KUBECOORD_PORCUPINE, else beside this Python (the venv's bin,
    where ``make porcupine`` puts it), else on PATH."""
    configured = os.environ.get(ENVIRONMENT)
    if configured:
        return Path(configured) if Path(configured).is_file() else None
    beside = Path(sys.executable).parent / BINARY
    if beside.is_file():
        return beside
    found = shutil.which(BINARY)
    return Path(found) if found else None


def missing_reason() -> str | None:
    """Why the tier cannot judge here (None when it can)."""
    if find_checker() is not None:
        return None
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        return f"no {BINARY} (the Porcupine checker) and no Go toolchain to build it: install Go, then `make porcupine`"
    return f"no {BINARY} (the Porcupine checker) beside {sys.executable} or on PATH: run `make porcupine` (Go: {go})"


@dataclass
class Verdict:
    """What the checker said about one history."""

    status: int
    """0 linearizable, 1 a violation, 2 bad input, 3 timed out."""
    report: dict[str, Any]
    stderr: str
    violations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == 0

    def seconds(self) -> float:
        """The checker's own time over both models."""
        return sum(float(self.report.get(model, {}).get("seconds", 0.0)) for model in ("kv", "locks"))


def check(history: Path, out: Path, *, timeout: float = 120.0, checker: Path | None = None) -> Verdict:
    """Judges the history file ``history`` (recording.merge's form); a failing one's files go to ``out``."""
    binary = checker or find_checker()
    if binary is None:
        raise FileNotFoundError(missing_reason())
    done = subprocess.run(
        [str(binary), "-out", str(out), "-timeout", f"{timeout}s", str(history)],
        capture_output=True, text=True, check=False, timeout=timeout * 4 + 60,
    )
    lines = done.stdout.strip().splitlines()
    report: dict[str, Any] = json.loads(lines[-1]) if lines and done.returncode in (0, 1, 3) else {}
    return Verdict(done.returncode, report, done.stderr, list(report.get("violations") or []))


def check_history(history: dict[str, Any], folder: Path, *, timeout: float = 120.0) -> Verdict:
    """Writes ``history`` to ``folder/history.json`` and judges it (failures in ``folder/porcupine``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "history.json"
    path.write_text(json.dumps(history))
    return check(path, folder / "porcupine", timeout=timeout)
