"""Release artefacts that cannot be built here (no Docker engine, no registry): the
Dockerfile builds the kubecoord wheel and installs that, runs as a non-root user, and the
release workflow builds through `make dist`. (`make dist` itself builds and checks the
wheels; actionlint checks the workflow in `make lint`.)"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _stages() -> list[list[str]]:
    stages: list[list[str]] = []
    logical = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    for line in logical.splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            stages.append([])
        if stages and line and not line.startswith("#"):
            stages[-1].append(line)
    return stages


def test_the_image_installs_the_wheel_it_builds() -> None:
    build, final = _stages()
    run = " ".join(line for line in build if line.startswith("RUN "))
    assert "pip wheel --no-deps --wheel-dir /wheels ." in run
    assert re.search(r"pip install .*kubecoord\[[a-z,]*operator[a-z,]*\] @ file://\$\{wheel\}", run), run
    assert "-c constraints.txt" in run and "kubecoord --version" in run
    assert any(line.startswith("COPY --from=build /opt/kubecoord") for line in final)
    assert not any("/src" in line for line in final), "the source tree must not reach the image"


def test_the_image_runs_as_a_non_root_user_matching_the_chart() -> None:
    final = _stages()[-1]
    (user,) = [line.split()[1] for line in final if line.startswith("USER ")]
    uid, gid = (int(part) for part in user.split(":"))
    assert uid != 0 and gid != 0
    values = yaml.safe_load((ROOT / "charts/kubecoord/values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == uid and values["podSecurityContext"]["runAsNonRoot"]


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
