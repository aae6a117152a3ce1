"""The operator image (it cannot be built here: no Docker engine) agrees with the chart that
runs it — user, ports, command, extras — and installs the wheel it builds, never the
source tree."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from kubecoord.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
VALUES = yaml.safe_load((ROOT / "charts" / "kubecoord" / "values.yaml").read_text())


def test_image_runs_as_the_charts_non_root_user() -> None:
    (user,) = re.findall(r"^USER (\S+)$", DOCKERFILE, re.M)
    pod = VALUES["podSecurityContext"]
    assert user == f"{pod['runAsUser']}:{pod['runAsGroup']}" and pod["runAsUser"] != 0
    assert VALUES["securityContext"]["readOnlyRootFilesystem"] is True
    assert "PYTHONDONTWRITEBYTECODE=1" in DOCKERFILE and "compileall" in DOCKERFILE  # nothing written at run time


def test_image_exposes_the_charts_ports_and_runs_the_operator() -> None:
    (ports,) = re.findall(r"^EXPOSE (.+)$", DOCKERFILE, re.M)
    assert set(ports.split()) == {str(VALUES["health"]["port"]), str(VALUES["metrics"]["port"])}
    assert 'ENTRYPOINT ["kubecoord"]' in DOCKERFILE and "operator" in SUBCOMMANDS


def test_image_installs_the_wheel_it_builds_with_the_operators_extras_and_pins() -> None:
    # The release's artefact, not the source tree: build the wheel, install that file.
    (wheels,) = re.findall(r"pip wheel --no-deps --wheel-dir (\S+) \.", DOCKERFILE)
    assert f'wheel="$(ls {wheels}/kubecoord-*.whl)"' in DOCKERFILE
    (install,) = re.findall(r"^.*/pip install .*$", DOCKERFILE, re.M)
    assert "-c constraints.txt" in install and "COPY pyproject.toml constraints.txt" in DOCKERFILE
    (extras,) = re.findall(r'"kubecoord\[([a-z,]+)\] @ file://\$\{wheel\}"', install)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras.split(",") == ["kubernetes", "zookeeper", "operator"] and set(extras.split(",")) <= set(declared)
    assert "kubecoord --version" in DOCKERFILE  # the build fails if the installed command does not start
    final = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    assert "COPY --from=build /opt/kubecoord" in final
    assert "/src" not in final, "the source tree must not reach the image"
