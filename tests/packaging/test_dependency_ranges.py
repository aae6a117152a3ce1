"""A library declares compatible ranges and leaves exact pins to constraints.txt: installed
into a real project, an exact pin in the wheel's metadata conflicts with whatever else that
project uses. The pins the Makefile and CI install must lie inside the declared ranges."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# Released in lockstep with the product: the one exact pin a wheel may carry.
SIBLINGS = {"kubecoord", "kubecoord-testkit"}


def declared() -> Iterator[tuple[str, Requirement]]:
    for path in ("pyproject.toml", "testkit/pyproject.toml"):
        project = tomllib.loads((ROOT / path).read_text())["project"]
        groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
        for group, lines in groups.items():
            for line in lines:
                yield f"{path} {group}", Requirement(line)


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            found[canonicalize_name(name)] = version
    return found


THIRD_PARTY = [(where, req) for where, req in declared() if canonicalize_name(req.name) not in SIBLINGS]


@pytest.mark.parametrize(("where", "requirement"), THIRD_PARTY, ids=[f"{w} {r.name}" for w, r in THIRD_PARTY])
def test_a_declared_dependency_is_a_range_pinned_inside_it_by_constraints(where: str, requirement: Requirement) -> None:
    operators = {spec.operator for spec in requirement.specifier}
    assert operators and operators <= {">=", "<", "~=", "!="}, f"{where}: {requirement} is not a range"
    pinned = pins().get(canonicalize_name(requirement.name))
    assert pinned is not None, f"constraints.txt pins no version of {requirement.name}"
    assert requirement.specifier.contains(pinned, prereleases=True), (
        f"constraints.txt pins {requirement.name}=={pinned}, outside {where}'s {requirement.specifier}"
    )


def test_the_check_covers_every_extra() -> None:
    # Not vacuous: every backend's client and the test tools are among the checked lines.
    names = {canonicalize_name(req.name) for _, req in THIRD_PARTY}
    assert {"kubernetes", "kazoo", "cassandra-driver", "kopf", "pyspark", "pytest", "cel-python"} <= names
