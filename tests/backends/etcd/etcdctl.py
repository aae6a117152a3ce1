"""etcdctl (kubecoord-etcdctl, beside the tests' etcd) as a peer: `etcdctl elect` and `etcdctl lock`, their
output lines read on a thread, killed with -9 and reaped."""

from __future__ import annotations

import queue
import subprocess
import threading
import time

from kubecoord_testkit import processes
from kubecoord_testkit.servers.etcd import EtcdCluster, etcdctl_binary


class Etcdctl:
    def __init__(self, etcd: EtcdCluster, *args: str) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.process = subprocess.Popen(
            [str(etcdctl_binary()), f"--endpoints={etcd.endpoints}", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_line(self, timeout: float) -> str | None:
        """The next output line within ``timeout`` seconds, or None."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait_line(self, timeout: float) -> tuple[str, float] | None:
        """The next line and the time.monotonic() it was read, or None."""
        line = self.next_line(timeout)
        return (line, time.monotonic()) if line is not None else None

    def kill(self) -> None:
        processes.stop(self.process, 0.0, signum=9)

    def stop(self) -> None:
        processes.stop(self.process, 5.0)


def etcdctl(etcd: EtcdCluster, *args: str) -> str:
    """Run ``etcdctl ARGS`` once against ``etcd`` (the independent view of the keys); its
    output. A failing command fails the test with etcdctl's error."""
    done = subprocess.run(
        [str(etcdctl_binary()), f"--endpoints={etcd.endpoints}", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
    )
    assert done.returncode == 0, f"etcdctl {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout


def keys(etcd: EtcdCluster, prefix: str) -> list[str]:
    """The keys under ``prefix`` as etcdctl lists them (by key)."""
    return [line for line in etcdctl(etcd, "get", "--prefix", prefix, "--keys-only").splitlines() if line]


def revision(etcd: EtcdCluster) -> int:
    """The cluster's current revision, from etcdctl's own read."""
    import json

    return int(json.loads(etcdctl(etcd, "get", "--limit", "1", "-w", "json", "x"))["header"]["revision"])


def leases(etcd: EtcdCluster) -> set[str]:
    """The ids (hex) of the leases etcdctl lists."""
    import json

    listed = json.loads(etcdctl(etcd, "lease", "list", "-w", "json")).get("leases") or []
    return {format(int(lease["id"]), "x") for lease in listed}
