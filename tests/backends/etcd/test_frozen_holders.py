"""A lock holder in its own process frozen (SIGSTOP) past its lease's TTL, or killed -9 as
its winning transaction lands. The frozen holder must not hold again once resumed, and its
fenced writes are refused once the next holder wrote; the killed one's lock passes on only
when its lease is gone. Judged by etcd: the keys' revisions and the leases etcdctl reports."""

from __future__ import annotations

import base64
import json
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

import kubecoord
from kubecoord.api import Fence
from kubecoord_testkit import processes
from kubecoord_testkit.servers.etcd import EtcdCluster

from .conftest import read_line
from .etcdctl import etcdctl
from .timings import LEASE_DURATION, TIMINGS


@pytest.fixture
def holders(tmp_path: pathlib.Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``python -m tests.backends.etcd.MODULE ARGS`` (stderr kept in tmp_path); reaped at the end."""
    started: list[subprocess.Popen[str]] = []

    def spawn(module: str, *args: str) -> subprocess.Popen[str]:
        with open(tmp_path / f"{module}-{len(started)}.stderr", "w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", f"tests.backends.etcd.{module}", *args],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
            )
        started.append(process)
        return process

    yield spawn
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
    processes.stop_all(started, 5.0)


def _ask(process: subprocess.Popen[str], command: str) -> str:
    """Send ``command`` and return its answer (lines the writer thread printed are skipped)."""
    assert process.stdin is not None
    process.stdin.write(command + "\n")
    process.stdin.flush()
    skipped: list[str] = []
    while True:
        line = read_line(process, 20)
        assert line is not None, f"no answer to {command} (printed meanwhile: {skipped})"
        if line.startswith(("held ", "written ", "refused ")):
            return line
        skipped.append(line)


def _kv(etcd: EtcdCluster, key: str) -> dict[str, int]:
    (kv,) = json.loads(etcdctl(etcd, "get", key, "-w", "json"))["kvs"]
    return {name: int(kv[name]) for name in ("create_revision", "mod_revision", "version")}


def test_a_holder_frozen_past_its_lease_does_not_hold_again_and_its_fenced_writes_are_refused(
    etcd_server: EtcdCluster, holders: Callable[..., subprocess.Popen[str]]
) -> None:
    prefix = f"fz-{uuid.uuid4().hex[:8]}"
    url = f"etcd://{etcd_server.hosts}/{prefix}"
    frozen = holders("holder_process", url, "job", "a")
    line = read_line(frozen, 30)
    assert line is not None and line.startswith("holding "), line
    token_a = int(line.split()[1])
    assert _ask(frozen, "write").startswith("written ")
    frozen.send_signal(signal.SIGSTOP)
    coord = kubecoord.connect(url, **TIMINGS)
    lock = coord.lock("job", id="b")
    assert lock.acquire(timeout=LEASE_DURATION + 20)  # once a's lease expired
    token_b = lock.token
    assert token_b is not None and token_b > token_a
    coord.storage("fenced").put("b", str(token_b), fence=Fence("job", token_b))
    b_written = _kv(etcd_server, f"{prefix}/_kubecoord/kv/fenced/b")["mod_revision"]
    frozen.send_signal(signal.SIGCONT)
    assert _ask(frozen, "check") == "held False"  # the first look after the freeze
    assert _ask(frozen, "write") == "refused FencedError"  # its token is below b's
    time.sleep(1.0)  # a's careful writer, had it kept writing, would have by now
    assert _ask(frozen, "check") == "held False"
    # Every write of a that etcd took is older than b's first (its revision is lower).
    assert _kv(etcd_server, f"{prefix}/_kubecoord/kv/fenced/a")["mod_revision"] < b_written
    assert lock.is_held()
    lock.release()
    coord.close()


def test_a_holder_killed_as_its_winning_transaction_lands_passes_the_lock_on_only_with_its_lease(
    etcd_server: EtcdCluster, holders: Callable[..., subprocess.Popen[str]]
) -> None:
    prefix = f"fz-{uuid.uuid4().hex[:8]}"
    url = f"etcd://{etcd_server.hosts}/{prefix}"
    victim = holders("candidate_process", url, "lock", "job", "a")
    deadline = time.monotonic() + 30
    while True:  # the moment a's candidate key exists, a dies: its answer may be unread
        found = json.loads(etcdctl(etcd_server, "get", "--prefix", f"{prefix}/job/", "-w", "json")).get("kvs")
        if found:
            break
        assert time.monotonic() < deadline, "a never put its key"
    victim.kill()
    victim.wait()
    (kv,) = found
    key, lease, created = base64.b64decode(kv["key"]).decode(), int(kv["lease"]), int(kv["create_revision"])
    coord = kubecoord.connect(url, **TIMINGS)
    lock = coord.lock("job", id="b")
    assert lock.acquire(timeout=LEASE_DURATION + 20)
    # b holds only because a's lease expired and took a's key with it.
    ttl = json.loads(etcdctl(etcd_server, "lease", "timetolive", format(lease, "x"), "-w", "json"))
    assert int(ttl["ttl"]) == -1, ttl
    assert json.loads(etcdctl(etcd_server, "get", key, "-w", "json")).get("kvs") is None
    assert lock.token is not None and lock.token > created
    lock.release()
    coord.close()
