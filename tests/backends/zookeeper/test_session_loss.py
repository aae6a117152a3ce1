"""Connection states: SUSPENDED makes a leader uncertain, LOST makes it re-enter and re-join.

SUSPENDED is produced by cutting the client's TCP connection at a proxy and refusing
reconnection for a moment (well within the session timeout); LOST by forcing the
session to expire from a second client that attaches to it.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path
from typing import cast

import kubecoord
from kubecoord.backends.zookeeper.coordinator import ZooKeeperCoordinator
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import Recorder, eventually

from .helpers import TcpProxy, events, force_expiry


def test_suspended_leader_is_uncertain_until_reconnected(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    proxy = TcpProxy(zookeeper_server.servers[0].client_port)
    try:
        url = f"zookeeper://127.0.0.1:{proxy.port}/suspend-{uuid.uuid4().hex[:8]}"
        with kubecoord.connect(url, lease_duration=4.0, history=history) as coord:
            election = coord.leader_election("svc")
            seen: Recorder[str | None] = Recorder()
            election.add_listener(seen)
            assert election.nominate("a")
            seen.wait_last("a")
            epoch = (election.get_leader() or kubecoord.Leader("", "", 0)).epoch

            proxy.cut()  # SUSPENDED at once; no reconnection while refused
            seen.wait_last(None)
            for _ in range(5):
                assert not election.is_leader(), "no leader work while SUSPENDED"
                time.sleep(0.1)
            proxy.allow()
            seen.wait_last("a")
            eventually(election.is_leader)
            leader = election.get_leader()
            assert leader is not None and (leader.id, leader.epoch) == ("a", epoch), "same session, same node"
    finally:
        proxy.close()
    kinds = [e["event"] for e in events(history) if e["primitive"] == "leader_election"]
    assert kinds[:2] == ["acquired", "renewed"] and "lost" not in kinds


def test_lost_session_reenters_election_and_rejoins_group(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    url = f"zookeeper://{zookeeper_server.hosts}/lost-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(url, lease_duration=2.0, history=history) as victim, \
            kubecoord.connect(url, lease_duration=2.0) as other:
        zookeeper_victim = cast(ZooKeeperCoordinator, victim)  # a zookeeper:// URL
        election = victim.leader_election("svc")
        group = victim.group_membership("workers")
        rival = other.leader_election("svc")
        watcher = other.group_membership("workers")
        members: Recorder[set[str]] = Recorder()
        watcher.add_listener(members)
        mine: Recorder[str | None] = Recorder()
        election.add_listener(mine)

        assert election.nominate("a", data="host-a")
        group.join("m1", data="payload")
        assert not rival.nominate("b")
        members.wait_last({"m1"})
        old_session = zookeeper_victim.client_id
        epoch_a = (rival.get_leader() or kubecoord.Leader("", "", 0)).epoch

        force_expiry(zookeeper_server.hosts, victim)

        # b takes over; a re-enters behind it with a new node, m1 re-joins with its data.
        eventually(lambda: rival.is_leader("b"))
        leader_b = rival.get_leader()
        assert leader_b is not None and leader_b.id == "b" and leader_b.epoch > epoch_a
        mine.wait_last("b")
        assert not election.is_leader()
        eventually(lambda: zookeeper_victim.client_id != old_session)
        eventually(lambda: watcher.membership() == {"m1": "payload"})
        members.wait_last({"m1"})

        rival.resign("b")
        mine.wait_last("a")
        eventually(lambda: election.is_leader("a"))
        leader_a = rival.get_leader()
        assert leader_a is not None and (leader_a.id, leader_a.data) == ("a", "host-a")
        assert leader_a.epoch > leader_b.epoch
    log = [(e["event"], e.get("member")) for e in events(history)]
    assert ("lost", "a") in log and ("expired", "m1") in log
    assert log.count(("joined", "m1")) == 2 and log.count(("acquired", "a")) == 2


def test_requests_fail_typed_while_the_server_is_down(private_zookeeper: ZooKeeperServer) -> None:
    url = f"zookeeper://{private_zookeeper.hosts}/down"
    with kubecoord.connect(url, lease_duration=2.0, request_timeout=1.0) as coord:
        kv = coord.storage("store")
        kv.put("k", "v")
        private_zookeeper.stop()
        for call in (lambda: kv.put("k2", "v"), lambda: kv.fetch("k").result(10), lambda: kv.children()):
            try:
                call()
            except kubecoord.BackendUnavailableError:
                continue
            raise AssertionError("a request to a stopped server must raise BackendUnavailableError")


def test_unreachable_server_fails_connect_typed() -> None:
    from kubecoord_testkit.servers.managed import free_port

    try:
        kubecoord.connect(f"zookeeper://127.0.0.1:{free_port()}/x", connect_timeout=0.5)
    except kubecoord.BackendUnavailableError:
        return
    raise AssertionError("connect() to a closed port must raise BackendUnavailableError")


def test_a_candidate_closed_while_suspended_withdraws_once_reconnected(
    zookeeper_server: ZooKeeperServer,
) -> None:
    """Closing an election handle while SUSPENDED cannot delete its node, and the session
    may well survive the disconnection — and with it the node, the lowest: nobody else
    could lead until this process ended (a soak's group coordinator went 118 s without a
    leader after a member left during a proxy hold). The deletion is retried on reconnection."""
    proxy = TcpProxy(zookeeper_server.servers[0].client_port)
    chroot = f"closed-{uuid.uuid4().hex[:8]}"
    try:
        with kubecoord.connect(f"zookeeper://127.0.0.1:{proxy.port}/{chroot}", lease_duration=4.0) as coord, \
                kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}", lease_duration=4.0) as other:
            election = coord.leader_election("svc")
            assert election.nominate("a")
            rival = other.leader_election("svc")
            assert not rival.nominate("b")
            proxy.cut()  # SUSPENDED; no reconnection while refused
            eventually(lambda: not election.is_leader("a"))
            election.close()  # its node cannot be deleted now
            proxy.allow()  # reconnects within the session timeout: the same session, the node kept
            eventually(lambda: rival.is_leader("b"), timeout=15)
            leader_b = rival.get_leader()
            assert leader_b is not None
            assert coord.leader_election("svc").get_leader() == kubecoord.Leader("b", "", leader_b.epoch)
    finally:
        proxy.close()


def test_a_resigning_leader_stops_before_its_successor_can_start(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """The successor may lead once the resigning leader's node is deleted at the server,
    before the delete's answer is back: the resigning leader stops believing it leads, and
    its ``resigned`` says so (valid_until), before it sends the delete. A soak saw a
    0.3 s overlap under 0.3 s of latency each way to the resigning leader's server."""
    chroot = f"resign-{uuid.uuid4().hex[:8]}"
    history = tmp_path / "a.jsonl"
    proxy = ThreadedFaultProxy(("127.0.0.1", zookeeper_server.servers[0].client_port)).start()
    try:
        with kubecoord.connect(f"zookeeper://{proxy.address}/{chroot}", lease_duration=10.0,
                               history=history) as slow, \
                kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}", lease_duration=10.0,
                                  history=tmp_path / "b.jsonl") as fast:
            leader, successor = slow.leader_election("svc"), fast.leader_election("svc")
            assert leader.nominate("a")
            assert not successor.nominate("b")
            proxy.delay(0.5)  # each way
            leader.resign("a")
            eventually(lambda: successor.is_leader("b"))
    finally:
        proxy.close()
    resigned = next(e for e in events(history) if e["event"] == "resigned")
    acquired = next(e for e in events(tmp_path / "b.jsonl") if e["event"] == "acquired")

    def at(value: str) -> float:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()

    assert at(resigned.get("valid_until", resigned["ts"])) < at(acquired["ts"])
