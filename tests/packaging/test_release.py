"""The release workflow, which cannot run here (no Docker engine, no registry): it builds
through `make dist` (which builds and checks the wheels), pushes a multi-arch image and the
chart, and names no registry host. actionlint checks it in `make lint`; the Dockerfile it
builds is checked by test_dockerfile.py."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_release_workflow_builds_through_make_dist_and_names_no_registry() -> None:
    text = (ROOT / ".github/workflows/release.yml").read_text()
    workflow = yaml.safe_load(text)
    steps = [step for job in workflow["jobs"].values() for step in job.get("steps", [])]
    assert any(step.get("run") == "make dist" for step in steps)
    assert {"dist", "wheels", "image", "chart"} <= set(workflow["jobs"])
    image = next(step for step in workflow["jobs"]["image"]["steps"] if "build-push-action" in step.get("uses", ""))
    assert image["with"]["platforms"] == "linux/amd64,linux/arm64"
    # Registries come from the repository's settings, never from a host name in the repository.
    assert not re.search(r"\b[a-z0-9-]+\.(io|com|dev|net|org)/", text), "a registry host name in the workflow"
