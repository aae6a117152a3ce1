"""`make cassandra-jars`: the jar cache shared by every checkout on the machine.

A fresh clone used to copy the jars again (its pom is newer than the cache by file time) by
deleting the cache and moving a new copy in, while another checkout's tests could be starting
a Cassandra from it. Here Maven is a script that counts its runs and writes two jars slowly.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_MVN = """#!/bin/sh
echo run >> "$MVN_RUNS"
[ -n "$MVN_FAILS" ] && exit 1
for arg in "$@"; do case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac; done
touch "$out/cassandra-all.jar"; sleep 0.3; touch "$out/guava.jar"
"""


class Make:
    """``make cassandra-jars`` of this repository, on a copy of its pom, into a cache under tmp."""

    def __init__(self, tmp: Path) -> None:
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "mvn").write_text(FAKE_MVN)
        (bin_dir / "mvn").chmod(0o755)
        self.pom = tmp / "pom.xml"
        self.pom.write_text((REPO / "testkit" / "cassandra" / "pom.xml").read_text())
        self.link = tmp / "cache" / "cassandra"
        self._runs = tmp / "runs"
        self._env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MVN_RUNS": str(self._runs)}

    def __call__(self, **env: str) -> int:
        return subprocess.run(
            ["make", "--no-print-directory", "-C", str(REPO), "cassandra-jars", f"CASSANDRA_POM={self.pom}",
             f"CASSANDRA_JARS={self.link}"],
            env={**self._env, **env}, capture_output=True, timeout=60,
        ).returncode

    def maven_runs(self) -> int:
        return len(self._runs.read_text().splitlines()) if self._runs.exists() else 0


@pytest.fixture
def make(tmp_path: Path) -> Make:
    return Make(tmp_path)


def jars(cache: Path) -> list[str]:
    return sorted(path.name for path in cache.iterdir())


def test_a_second_checkout_with_the_same_pom_copies_nothing(make: Make) -> None:
    link = make.link
    assert make() == 0
    assert link.is_symlink() and jars(link) == [".complete", "cassandra-all.jar", "guava.jar"]
    os.utime(make.pom)  # a fresh clone: the pom is newer than the cache
    assert make() == 0
    assert make.maven_runs() == 1


def test_a_new_pom_swaps_the_link_and_keeps_the_copy_in_use(make: Make) -> None:
    link = make.link
    assert make() == 0
    first = link.resolve()
    make.pom.write_text(make.pom.read_text() + "<!-- one more exclusion -->\n")
    assert make() == 0
    assert make.maven_runs() == 2 and link.resolve() != first
    assert jars(first) == jars(link), "the old copy stays whole for a Cassandra started from it"


def test_the_cache_of_the_old_layout_moves_aside(make: Make) -> None:
    link = make.link
    link.mkdir(parents=True)
    (link / "cassandra-all.jar").touch()
    (link / ".complete").touch()
    assert make() == 0
    assert link.is_symlink() and (link / "guava.jar").exists()
    assert [p for p in link.parent.iterdir() if ".before-" in p.name], "the old folder is kept, not deleted"


def test_two_checkouts_at_once_both_end_with_a_whole_cache(make: Make) -> None:
    link = make.link
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(make())) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [0, 0, 0]
    assert jars(link) == [".complete", "cassandra-all.jar", "guava.jar"]
    assert not [p for p in link.parent.iterdir() if "partial" in p.name or "link-" in p.name]


def test_a_failed_copy_leaves_nothing(make: Make) -> None:
    assert make(MVN_FAILS="1") != 0
    assert not make.link.parent.exists() or not list(make.link.parent.iterdir())
