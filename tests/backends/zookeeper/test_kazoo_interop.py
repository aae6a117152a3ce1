"""A kazoo Election contender on the same path is a candidate like ours, and never co-leads."""

from __future__ import annotations

import threading
import time
import uuid

from kazoo.client import KazooClient

import kubecoord
from kubecoord import Leader
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import Recorder, eventually


def test_kazoo_election_contender_is_counted_and_never_co_leads(
    zookeeper_server: ZooKeeperServer, zk: KazooClient
) -> None:
    chroot = f"interop-{uuid.uuid4().hex[:8]}"
    url = f"zookeeper://{zookeeper_server.hosts}/{chroot}"
    with kubecoord.connect(url) as first, kubecoord.connect(url) as second, kubecoord.connect(url) as observer:
        a = first.leader_election("svc")
        b = second.leader_election("svc")
        watch = observer.leader_election("svc")
        seen: Recorder[str | None] = Recorder()
        watch.add_listener(seen)
        assert a.nominate("a")
        seen.wait_last("a")

        kazoo_election = zk.Election(f"/{chroot}/elections/svc", "kazoo-k")
        kazoo_leads = threading.Event()
        kazoo_release = threading.Event()
        kazoo_interval: list[float] = []

        def lead() -> None:
            kazoo_interval.append(time.monotonic())
            kazoo_leads.set()
            kazoo_release.wait(30)
            kazoo_interval.append(time.monotonic())

        runner = threading.Thread(target=kazoo_election.run, args=(lead,), daemon=True)
        runner.start()
        eventually(lambda: len(kazoo_election.contenders()) == 2)
        assert not b.nominate("b")
        # kazoo lists our candidates too, in election order (our node data starts with the id).
        assert [c.split("\n")[0] for c in kazoo_election.contenders()] == ["a", "kazoo-k", "b"]
        assert not kazoo_leads.is_set()

        b_view: list[tuple[float, bool]] = []
        b.add_listener(lambda leader: b_view.append((time.monotonic(), leader == "b")))

        a.resign("a")
        assert kazoo_leads.wait(10), "the kazoo contender should lead after our leader resigned"
        seen.wait_last("kazoo-k")
        leader = watch.get_leader()
        assert leader is not None and leader.id == "kazoo-k" and leader.data == ""
        for _ in range(5):  # while kazoo leads, our next candidate must not
            assert not b.is_leader()
            time.sleep(0.1)

        kazoo_release.set()
        runner.join(10)
        seen.wait_last("b")
        eventually(lambda: b.is_leader("b"))
        eventually(lambda: any(leads for _, leads in b_view))
        took_over = min(t for t, leads in b_view if leads)
        assert took_over > kazoo_interval[1], "b led before the kazoo contender released"
        after = watch.get_leader() or Leader("", "", 0)
        assert after.id == "b" and after.epoch > leader.epoch


def test_kazoo_lock_waits_for_our_leader(zookeeper_server: ZooKeeperServer, zk: KazooClient) -> None:
    chroot = f"interop-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}") as coord:
        election = coord.leader_election("svc")
        assert election.nominate("ours", data="payload")
        lock = zk.Lock(f"/{chroot}/elections/svc", "theirs")
        assert not lock.acquire(blocking=False), "kazoo's Lock must see our leader's node"
        election.resign("ours")
        assert lock.acquire(timeout=10)
        lock.release()
