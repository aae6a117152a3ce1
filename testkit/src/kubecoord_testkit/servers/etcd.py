"""Real etcd servers for tests and benchmarks: one member or a loopback cluster.

Status: test support. Usage::

    with EtcdCluster.single(tmp_path) as etcd:
        coord = kubecoord.connect(f"etcd://{etcd.hosts}")
    with EtcdCluster.cluster(tmp_path, 3) as etcd:
        etcd.kill(etcd.leader())      # kill -9 the Raft leader ...
        etcd.restart(0)               # ... and start a member again on its data
    with EtcdCluster.single(tmp_path, tls=True) as etcd:   # https, client certificates
        coord = kubecoord.connect(f"etcd://{etcd.hosts}", tls=etcd.client_tls)

The binaries are ``kubecoord-etcd`` and ``kubecoord-etcdctl`` beside this Python (``make
etcd`` builds etcd 3.5.36 there with Go, pinned by testkit/etcd/go.mod and go.sum) or on
PATH, or ``$ETCD_BIN`` (etcdctl is looked for beside it). etcd 3.5.0 to 3.5.2 are refused:
a member of those releases killed under load can restart without writes it had applied
(etcd's data-inconsistency postmortem of 2022), and these servers are killed under load on
purpose. Every member listens on 127.0.0.1 on free client and peer ports, with
``--unsafe-no-fsync`` (a loaded test disk does not slow every write; a process killed -9
loses nothing: the kernel still writes what it had written). Ready means every running
member answers ``/health`` with ``"health":"true"`` (a member answers so only once the
cluster has a leader). With ``tls=True`` the client port serves https with a certificate of
a test CA (``root/pki``, kubecoord_testkit.servers.pki) and asks for a client certificate
signed by it (``--client-cert-auth``); peers talk plain http on the loopback.

Guarantees: stop() and kill() reap the processes they end (PID 1 here reaps no orphans);
a start that fails half-way stops what it started. Not guaranteed: that free ports stay
free until etcd binds them (the member then exits and start() fails with its log).
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import re
import shutil
import ssl
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from kubecoord_testkit.servers.managed import LoggedProcess, ManagedServers, free_port, wait_ready
from kubecoord_testkit.servers.pki import issue, make_ca

READY_TIMEOUT = 60.0
"""etcd is ready in ~0.5 s on a quiet machine; a loaded 2-core one takes far longer."""


class EtcdStartFailed(RuntimeError):
    """etcd is not installed, or a member did not become ready (with its log's tail)."""


BINARY = "kubecoord-etcd"
CTL_BINARY = "kubecoord-etcdctl"
UNSAFE_RELEASES = ("3.5.0", "3.5.1", "3.5.2")
"""etcd releases whose members can lose applied writes when killed (fixed in 3.5.3)."""


def etcd_binary() -> pathlib.Path:
    """The etcd binary: ``$ETCD_BIN``, else kubecoord-etcd beside this Python (the venv's
    bin, where ``make etcd`` puts it), else on PATH; EtcdStartFailed when there is none or
    it is a release that loses writes on a crash."""
    override = os.environ.get("ETCD_BIN")
    if override:
        binary = pathlib.Path(override)
    else:
        beside = pathlib.Path(sys.executable).parent / BINARY
        found = beside if beside.is_file() else shutil.which(BINARY)
        if found is None:
            raise EtcdStartFailed(f"no etcd: no {BINARY} beside {sys.executable} or on PATH; run `make etcd` "
                                  "(builds it with Go) or set $ETCD_BIN")
        binary = pathlib.Path(found)
    _check_release(binary)
    return binary


def etcdctl_binary() -> pathlib.Path:
    """etcdctl, beside the etcd binary."""
    etcd = etcd_binary()
    return etcd.with_name(CTL_BINARY if etcd.name == BINARY else "etcdctl")


@functools.cache
def release(binary: pathlib.Path) -> str:
    """The etcd release ``binary`` is ("3.5.36"), as its ``--version`` says; EtcdStartFailed
    when it says none."""
    try:
        answer = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EtcdStartFailed(f"{binary} --version failed: {exc}") from None
    version = re.search(r"etcd Version: (\S+)", answer.stdout)
    if version is None:
        raise EtcdStartFailed(f"{binary} --version did not name a version: {answer.stdout[:200]!r}")
    return version.group(1)


def _check_release(binary: pathlib.Path) -> None:
    found = release(binary)
    if found in UNSAFE_RELEASES:
        raise EtcdStartFailed(f"{binary} is etcd {found}: its members can lose applied writes when "
                              "killed under load (fixed in 3.5.3); run `make etcd` or set $ETCD_BIN to etcd >= 3.5.3")


@dataclass(eq=False)
class EtcdMember:
    """One etcd process: its name, ports, data directory and (while running) process."""

    name: str
    client_port: int
    peer_port: int
    data_dir: pathlib.Path
    process: LoggedProcess | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False)
    """The test client's context when the member serves https (None: http)."""

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive()

    def healthy(self) -> bool:
        with urllib.request.urlopen(f"{self.client_url}/health", timeout=2, context=self.tls) as answer:
            return bool(json.loads(answer.read()).get("health") == "true")

    def status(self) -> dict[str, Any]:
        """The member's /v3/maintenance/status answer (its member id, Raft leader, revision)."""
        request = urllib.request.Request(f"{self.client_url}/v3/maintenance/status", data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=2, context=self.tls) as answer:
            status: dict[str, Any] = json.loads(answer.read())
            return status


class EtcdCluster(ManagedServers):
    """``size`` etcd members on 127.0.0.1 forming one cluster, stopped on exit."""

    def __init__(self, root: pathlib.Path, size: int, *, tls: bool = False) -> None:
        if size < 1:
            raise ValueError(f"an etcd cluster has at least one member, not {size}")
        self.root = root
        self.pki: pathlib.Path | None = root / "pki" if tls else None
        self.members = [
            EtcdMember(f"member-{index}", free_port(), free_port(), root / f"member-{index}") for index in range(size)
        ]
        self._started = False

    @classmethod
    def single(cls, root: pathlib.Path, *, tls: bool = False) -> EtcdCluster:
        return cls(root, 1, tls=tls)

    @classmethod
    def cluster(cls, root: pathlib.Path, size: int = 3, *, tls: bool = False) -> EtcdCluster:
        return cls(root, size, tls=tls)

    @property
    def client_tls(self) -> dict[str, str]:
        """The etcd backend's ``tls`` option for a client of this https cluster: the test
        CA and a client certificate it signed."""
        if self.pki is None:
            raise RuntimeError("this etcd cluster serves http (EtcdCluster(..., tls=True) serves https)")
        return {"ca_file": str(self.pki / "ca.crt"), "certfile": str(self.pki / "client.crt"),
                "keyfile": str(self.pki / "client.key")}

    @property
    def hosts(self) -> str:
        """HOST:PORT[,HOST:PORT...] of every member's client port (an etcd:// URL's location)."""
        return ",".join(f"127.0.0.1:{member.client_port}" for member in self.members)

    @property
    def endpoints(self) -> str:
        """etcdctl's ``--endpoints``: every member's client URL."""
        return ",".join(member.client_url for member in self.members)

    def start(self) -> None:
        if self.pki is not None:
            make_ca(self.pki)
            issue(self.pki, "server", "/CN=etcd", "server-and-client")
            issue(self.pki, "client", "/CN=kubecoord-test-client", "client")
            context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
            context.load_cert_chain(str(self.pki / "client.crt"), str(self.pki / "client.key"))
            for member in self.members:
                member.tls = context
        for index in range(len(self.members)):
            self._launch(index)
        self._started = True
        for member in self.members:
            self._wait(member)

    def restart(self, index: int) -> None:
        """Start member ``index`` again on its data directory (after kill() or stop_member())."""
        member = self.members[index]
        if member.running:
            raise RuntimeError(f"{member.name} is running")
        self._launch(index)
        self._wait(member)

    def kill(self, index: int) -> None:
        """kill -9 member ``index`` (reaped)."""
        process = self.members[index].process
        if process is not None:
            process.kill()
            self.members[index].process = None

    def leader(self) -> int:
        """The index of the member that is the Raft leader now."""
        for index, member in enumerate(self.members):
            if not member.running:
                continue
            status = member.status()
            if str(status.get("leader")) == str(status.get("header", {}).get("member_id")):
                return index
        raise LookupError("no running etcd member reports itself the Raft leader")

    def stop(self) -> None:
        for member in self.members:
            if member.process is not None:
                member.process.stop()
                member.process = None

    def _launch(self, index: int) -> None:
        member = self.members[index]
        member.data_dir.mkdir(parents=True, exist_ok=True)
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        state = "existing" if self._started else "new"
        member.process = LoggedProcess(member.name, [
            str(etcd_binary()), "--name", member.name, "--data-dir", str(member.data_dir / "data"),
            "--listen-client-urls", member.client_url, "--advertise-client-urls", member.client_url,
            "--listen-peer-urls", member.peer_url, "--initial-advertise-peer-urls", member.peer_url,
            "--initial-cluster", initial, "--initial-cluster-state", state,
            "--initial-cluster-token", f"kubecoord-{self.root.name}",
            "--log-level", "warn", "--unsafe-no-fsync", *self._tls_flags(),
        ], member.data_dir / "etcd.log")

    def _tls_flags(self) -> list[str]:
        if self.pki is None:
            return []
        return ["--cert-file", str(self.pki / "server.crt"), "--key-file", str(self.pki / "server.key"),
                "--client-cert-auth", "--trusted-ca-file", str(self.pki / "ca.crt")]

    @staticmethod
    def _wait(member: EtcdMember) -> None:
        process = member.process
        assert process is not None

        def gone() -> str | None:
            return None if process.alive() else f"exited with {process.popen.returncode}"

        def fail(message: str) -> EtcdStartFailed:
            return EtcdStartFailed(f"{message}:\n{process.tail()}")

        wait_ready(member.healthy, what=f"etcd {member.name}", timeout=READY_TIMEOUT, gone=gone, fail=fail)
