"""`make cassandra-jars`: the jar cache shared by every checkout on the machine.

A fresh clone used to copy the jars again (its pom is newer than the cache by file time) by
deleting the cache and moving a new copy in, while another checkout's tests could be starting
a Cassandra from it. Here Maven is a script that counts its runs and writes two jars slowly.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_MVN = """#!/bin/sh
echo run >> "$MVN_RUNS"
[ -n "$MVN_FAILS" ] && exit 1
for arg in "$@"; do case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac; done
touch "$out/cassandra-all.jar"; [ -n "$MVN_HANGS" ] && sleep 60; sleep 0.3; touch "$out/guava.jar"
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

    def command(self) -> list[str]:
        return ["make", "--no-print-directory", "-C", str(REPO), "cassandra-jars", f"CASSANDRA_POM={self.pom}",
                f"CASSANDRA_JARS={self.link}"]

    def __call__(self, **env: str) -> int:
        return subprocess.run(self.command(), env=self.env(**env), capture_output=True, timeout=60).returncode

    def env(self, **env: str) -> dict[str, str]:
        return {**self._env, **env}

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


def partials(make: Make) -> list[Path]:
    return [p for p in make.link.parent.iterdir() if ".partial." in p.name] if make.link.parent.exists() else []


def test_a_copy_killed_midway_is_cleaned_up_by_the_next_run(make: Make) -> None:
    """kill -9 of make, its shell and Maven while the jars are copied: no trap runs, the
    partial copy stays; the next run deletes it (its shell is gone) and makes a whole cache."""
    process = subprocess.Popen(make.command(), env=make.env(MVN_HANGS="1"), start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not [p for p in partials(make) if (p / "cassandra-all.jar").exists()]:
            assert time.monotonic() < deadline, "the copy never started"
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert len(partials(make)) == 1, "kill -9 leaves the partial copy (no trap runs)"
    assert make() == 0
    assert jars(make.link) == [".complete", "cassandra-all.jar", "guava.jar"]
    assert partials(make) == []


def test_only_partial_copies_whose_shell_is_gone_on_this_host_are_deleted(make: Make) -> None:
    assert make() == 0
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = socket.gethostname()
    whole = make.link.resolve()
    stale = Path(f"{whole}.partial.{host}.{gone.pid}.abcdef")
    live = Path(f"{whole}.partial.{host}.{os.getpid()}.abcdef")  # a run copying right now
    elsewhere = Path(f"{whole}.partial.another-host.{gone.pid}.abcdef")  # a cache shared over NFS
    for folder in (stale, live, elsewhere):
        folder.mkdir()
        (folder / "cassandra-all.jar").touch()
    assert make() == 0
    assert sorted(partials(make)) == sorted([live, elsewhere])
    assert make.maven_runs() == 1
