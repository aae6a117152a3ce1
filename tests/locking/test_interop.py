"""A kubecoord lock and its peers in other languages and libraries, on the same record:
kazoo's Lock on /CHROOT/elections/NAME (ZooKeeper) and client-go's LeaseLock (the
``le-candidate`` binary) on the Lease NAME (the real kube-apiserver). They exclude each
other, and ZooKeeper keeps its FIFO across both kinds of waiter."""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import threading
import time
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

import kubecoord
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.slow


def test_kazoo_lock_and_kubecoord_lock_exclude_each_other_in_fifo_order(
    zookeeper_server: ZooKeeperServer, zk: KazooClient
) -> None:
    chroot = f"interop-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}") as coord:
        kazoo_lock = zk.Lock(f"/{chroot}/elections/job", "kazoo")
        assert kazoo_lock.acquire(timeout=10)
        ours = coord.lock("job", id="ours")
        assert not ours.acquire(blocking=False)
        assert [h.id for h in ours.holders()] == ["kazoo"]  # kazoo's identifier reads as the id

        order: list[str] = []

        def ours_waits() -> None:
            if ours.acquire(timeout=30):
                order.append("ours")

        waiter = threading.Thread(target=ours_waits)
        waiter.start()
        time.sleep(0.5)  # queued behind kazoo's node
        kazoo_lock.release()
        waiter.join(30)
        assert order == ["ours"] and ours.is_held()
        first_token = ours.token

        # While we hold: kazoo waits; a second kazoo contender queued before our next
        # waiter is served first (FIFO by sequence number across both kinds).
        with pytest.raises(LockTimeout):
            zk.Lock(f"/{chroot}/elections/job", "kazoo-probe").acquire(timeout=0.5)
        kazoo_waiter = zk.Lock(f"/{chroot}/elections/job", "kazoo-2")

        def kazoo_2_waits() -> None:
            if kazoo_waiter.acquire(timeout=30):
                order.append("kazoo-2")
                time.sleep(0.3)
                kazoo_waiter.release()

        kazoo_thread = threading.Thread(target=kazoo_2_waits)
        kazoo_thread.start()
        time.sleep(0.5)
        second = coord.lock("job", id="second")

        def second_waits() -> None:
            if second.acquire(timeout=30):
                order.append("second")

        second_thread = threading.Thread(target=second_waits)
        second_thread.start()
        time.sleep(0.5)
        ours.release()
        kazoo_thread.join(30)
        second_thread.join(30)
        assert order == ["ours", "kazoo-2", "second"]
        assert second.token is not None and first_token is not None and second.token > first_token
        second.release()


class GoCandidate:
    """client-go's LeaseLock candidate; its JSON lines collected."""

    def __init__(self, binary: pathlib.Path, kubeconfig: pathlib.Path, lease: str, ident: str) -> None:
        self.lines: list[dict[str, Any]] = []
        self.process = subprocess.Popen(
            [
                str(binary),
                "--kubeconfig",
                str(kubeconfig),
                "--namespace",
                "default",
                "--lease",
                lease,
                "--id",
                ident,
                "--lease-duration",
                "2s",
                "--renew-deadline",
                "1.5s",
                "--retry-period",
                "0.4s",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(json.loads(line))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line["event"] == name]

    def wait(self, name: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while not self.events(name):
            assert time.monotonic() < deadline, f"le-candidate never said {name}: {self.lines}"
            time.sleep(0.02)
        return self.events(name)[0]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(15)


def test_client_go_leaselock_and_kubecoord_lock_exclude_each_other(
    le_candidate: pathlib.Path, real_kubeconfig: pathlib.Path
) -> None:
    lease = f"lock-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {
        "kubeconfig": str(real_kubeconfig), "lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.5
    }
    go = GoCandidate(le_candidate, real_kubeconfig, lease, "go-1")
    go_2: GoCandidate | None = None
    try:
        with kubecoord.connect("kubernetes://default", **options) as coord:
            go.wait("started_leading")
            ours = coord.lock(lease, id="ours")
            assert not ours.acquire(blocking=False)
            assert [h.id for h in ours.holders()] == ["go-1"]
            go.stop()  # ReleaseOnCancel: an empty holder; our waiter takes over by the watch
            assert ours.acquire(timeout=10)
            first = ours.holders()[0]
            assert first.id == "ours" and ours.token == first.token and first.token >= 1  # go-1 created it at 0

            go_2 = GoCandidate(le_candidate, real_kubeconfig, lease, "go-2")
            time.sleep(4)  # two lease durations: go-2 must not lead while we hold
            assert ours.is_held() and not go_2.events("started_leading")
            held_until = time.time()
            ours.release()
            started = go_2.wait("started_leading", timeout=15)
            assert started["ts"] >= held_until
            assert not ours.acquire(blocking=False)
    finally:
        go.stop()
        if go_2 is not None:
            go_2.stop()
