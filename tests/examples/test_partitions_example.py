"""The worked example examples/partitions: the worker runs on memory:// (as the README
shows) and the Deployment carries the very same worker."""

from __future__ import annotations

import importlib.util
import pathlib
from typing import Any

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "partitions"


def _load_worker() -> Any:
    spec = importlib.util.spec_from_file_location("partitions_worker", EXAMPLE / "worker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_deployment_runs_the_example_worker() -> None:
    docs = list(yaml.safe_load_all((EXAMPLE / "deployment.yaml").read_text()))
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert configmap["data"]["worker.py"] == (EXAMPLE / "worker.py").read_text()
    (group,) = [d for d in docs if d["kind"] == "Group"]
    assert group["spec"]["assignment"]["units"] == len(_load_worker().PARTITIONS)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] in group["spec"]["clients"]


def test_the_example_runs_on_memory(capsys: pytest.CaptureFixture[str]) -> None:
    _load_worker().run_in_memory(1.5)
    out = capsys.readouterr().out
    assert "worker-3 joins" in out and "worker-0 leaves" in out
    finals = [line for line in out.splitlines() if line.endswith("commits")]
    assert len(finals) == 3 and sum(int(line.split(": ")[1].split()[0]) for line in finals) == 64
