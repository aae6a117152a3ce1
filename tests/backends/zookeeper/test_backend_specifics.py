"""What only the zookeeper backend has: znode layout, implicit parents, size limit, ACLs, options."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

import kubecoord
from kubecoord import Coordinator
from kubecoord.backends.zookeeper.naming import decode_name, encode_name
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually


@pytest.fixture
def chroot() -> str:
    return f"specific-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def coord(zookeeper_server: ZooKeeperServer, chroot: str) -> Iterator[Coordinator]:
    with kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}") as coordinator:
        yield coordinator


def test_implicit_parents_are_not_keys_and_are_pruned(coord: Coordinator, zk: KazooClient, chroot: str) -> None:
    kv = coord.storage("store")
    root = f"/{chroot}/kv/store"
    kv.put("a/b/c", "deep")
    assert kv.fetch("a").result() is None and kv.fetch("a/b").result() is None
    assert kv.children("a") == {"b"}
    with pytest.raises(kubecoord.KeyNotFoundError):
        kv.update("a/b", "x")
    assert kv.put("a/b", "now a key") == 1  # an implicit parent becomes a key at version 1
    assert kv.update("a/b", "again", expected_version=1) == 2
    kv.delete("a/b/c")
    assert kv.fetch_versioned("a/b").result() == kubecoord.Versioned("again", 2)
    assert zk.exists(f"{root}/a/b/c") is None
    kv.delete("a/b")
    assert kv.children() == set()
    assert zk.exists(f"{root}/a") is None, "the empty implicit parent must be removed"


def test_deleting_a_key_with_keys_below_keeps_them(coord: Coordinator) -> None:
    kv = coord.storage("store")
    kv.put("p", "parent")
    kv.put("p/child", "c")
    kv.delete("p", expected_version=1)
    assert kv.fetch("p").result() is None
    assert kv.fetch("p/child").result() == "c"
    assert kv.put("p", "back") == 1
    kv.delete("p/child")
    assert kv.children() == {"p"}


@pytest.mark.parametrize("text", [".", "..", "%", "%2E", "zookeeper", "🔑", "\ue000private", "\ufff0x", "a b"])
def test_names_encode_reversibly_to_legal_znode_names(coord: Coordinator, text: str) -> None:
    assert decode_name(encode_name(text)) == text
    group = coord.group_membership("g")
    group.join(text, data=text)
    assert group.membership() == {text: text}
    kv = coord.storage("store")
    key = "zookeeper" if text in (".", "..") else text  # '.' and '..' are not valid key segments
    kv.put(key, text)
    assert kv.fetch(key).result() == text
    assert kv.children() == {key}


def test_values_over_the_request_limit_are_rejected_before_any_write(coord: Coordinator, zk: KazooClient,
                                                                    chroot: str) -> None:
    kv = coord.storage("store")
    assert kv.max_value_bytes == 0xFFFFF - 4096
    generation = coord.session.generation  # type: ignore[attr-defined]
    for size in (kv.max_value_bytes + 1, 0xFFFFF, 0xFFFFF + 1):
        with pytest.raises(kubecoord.ValueTooLargeError):
            kv.put("big", "x" * size)
    assert zk.exists(f"/{chroot}/kv/store/big") is None
    assert coord.session.generation == generation, "the connection was never dropped"  # type: ignore[attr-defined]
    kv.put("big", "x" * kv.max_value_bytes)  # the largest accepted value fits a request
    assert len(kv.fetch("big").result() or "") == kv.max_value_bytes


def test_election_znodes_use_kazoo_lock_naming(coord: Coordinator, zk: KazooClient, chroot: str) -> None:
    election = coord.leader_election("svc")
    election.nominate("a", data="payload")
    [node] = zk.get_children(f"/{chroot}/elections/svc")
    assert "__lock__" in node and node[-10:].isdigit()
    data, stat = zk.get(f"/{chroot}/elections/svc/{node}")
    assert data == b"a\npayload" and stat.ephemeralOwner != 0
    leader = election.get_leader()
    assert leader is not None and leader.epoch == stat.czxid


def test_acl_with_digest_auth(zookeeper_server: ZooKeeperServer, chroot: str) -> None:
    url = f"zookeeper://{zookeeper_server.hosts}/{chroot}"
    with kubecoord.connect(url, auth="alice:secret") as owner, kubecoord.connect(url) as stranger:
        owner.storage("store").put("k", "v")
        assert stranger.storage("store").fetch("k").result() == "v"  # world-readable
        with pytest.raises(kubecoord.PermissionDeniedError):
            stranger.storage("store").update("k", "mine now")
        with kubecoord.connect(url, auth="alice:secret") as same_user:
            assert same_user.storage("store").update("k", "v2") == 2


@pytest.mark.parametrize(
    ("url_tail", "options"),
    [
        ("/ok", {"lease_duration": -1}),
        ("/ok", {"no_such_option": 1}),
        ("/ok", {"acl": ["world:anyone:xyz"]}),
        ("/ok", {"acl": "world:anyone:r"}),
        ("/ok", {"auth": "no-colon"}),
        ("/ok", {"max_value_bytes": 2 * 1024 * 1024}),
        ("/ok", {"connection_retry": {"bogus": 1}}),
        ("/zookeeper", {}),
        ("/bad chroot", {}),
    ],
)
def test_bad_urls_and_options_are_rejected_before_connecting(
    url_tail: str, options: dict[str, Any]  # connect() takes **options: Any
) -> None:
    with pytest.raises(kubecoord.InvalidArgumentError):
        kubecoord.connect(f"zookeeper://127.0.0.1:1{url_tail}", **options)


def test_bad_host_list_is_rejected() -> None:
    with pytest.raises(kubecoord.InvalidArgumentError):
        kubecoord.connect("zookeeper://host:port:extra/x")


def test_elections_export_the_leadership_metrics(coord: Coordinator) -> None:
    from prometheus_client import REGISTRY

    service = f"metrics-{uuid.uuid4().hex[:8]}"

    def is_leader() -> float | None:
        labels = {"backend": "zookeeper", "service": service, "candidate": "pod-a"}
        return REGISTRY.get_sample_value("kubecoord_client_is_leader", labels)

    election = coord.leader_election(service)
    assert election.nominate("pod-a")
    assert is_leader() == 1.0
    election.resign("pod-a")
    assert is_leader() == 0.0


def test_a_leader_whose_node_is_deleted_behind_its_back_stops_leading(
    zookeeper_server: ZooKeeperServer, zk: KazooClient, chroot: str, tmp_path: Path
) -> None:
    url, history = f"zookeeper://{zookeeper_server.hosts}/{chroot}", tmp_path / "a.jsonl"
    with kubecoord.connect(url, history=history) as a, kubecoord.connect(url) as b:
        first, second = a.leader_election("svc"), b.leader_election("svc")
        assert first.nominate("a")
        assert not second.nominate("b")
        path = f"/{chroot}/elections/svc"
        lowest = min(zk.get_children(path), key=lambda node: node[-10:])
        zk.delete(f"{path}/{lowest}")  # a tool or a person, not the session
        eventually(lambda: second.is_leader("b"))
        eventually(lambda: not first.is_leader("a"))  # was: a led on, beside b
        leader = second.get_leader()
        assert leader is not None and leader.id == "b"
    events = [json.loads(line)["event"] for line in history.read_text().splitlines()]
    assert "lost" in events


def test_acquired_carries_when_its_node_was_created_before_anybody_saw_it_lead(
    zookeeper_server: ZooKeeperServer, chroot: str, tmp_path: Path
) -> None:
    """``acquired`` is stamped once the leader has read that its node is the lowest; an
    observer may see it lead first, never before its node's create was sent (``sent``):
    the pipeline's clock bounds start there."""
    url = f"zookeeper://{zookeeper_server.hosts}/{chroot}"
    a_history, b_history = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with kubecoord.connect(url, history=a_history) as a, kubecoord.connect(url, history=b_history) as b:
        first, second = a.leader_election("svc"), b.leader_election("svc")
        second.add_listener(lambda leader: None)
        assert first.nominate("a")
        eventually(lambda: b_history.exists() and '"observed"' in b_history.read_text())
        first.resign("a")
    (acquired,) = [e for e in map(json.loads, a_history.read_text().splitlines()) if e["event"] == "acquired"]
    (observed,) = [e for e in map(json.loads, b_history.read_text().splitlines())
                   if e["event"] == "observed" and e.get("member") == "a"]
    assert acquired["sent"] <= acquired["ts"]
    assert acquired["sent"] <= observed["ts"]  # RFC 3339 UTC with microseconds: ordered as text


def test_sent_is_read_on_the_clock_of_ts_across_a_wall_clock_step(
    zookeeper_server: ZooKeeperServer, chroot: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wall clock stepped back 5 s (NTP) while a candidate waited behind the leader: its
    ``acquired`` still carries a ``sent`` before its ``ts``, the create's moment as the
    stepped clock reads it (the pipeline places ``sent`` by the event's ``mono``)."""
    url = f"zookeeper://{zookeeper_server.hosts}/{chroot}"
    b_history = tmp_path / "b.jsonl"
    with kubecoord.connect(url) as a, kubecoord.connect(url, history=b_history) as b:
        first, second = a.leader_election("svc"), b.leader_election("svc")
        assert first.nominate("a")
        before = time.time()
        assert not second.nominate("b")
        after = time.time()
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() - 5.0)
        first.resign("a")
        eventually(lambda: second.is_leader("b"))
    (acquired,) = [e for e in map(json.loads, b_history.read_text().splitlines()) if e["event"] == "acquired"]
    sent = dt.datetime.fromisoformat(acquired["sent"].replace("Z", "+00:00")).timestamp()
    ts = dt.datetime.fromisoformat(acquired["ts"].replace("Z", "+00:00")).timestamp()
    assert before - 5.0 <= sent <= after - 5.0 < ts


def test_kv_events_name_the_store_root_incarnation_a_deletion_replaces(
    zookeeper_server: ZooKeeperServer, zk: KazooClient, chroot: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, history = f"zookeeper://{zookeeper_server.hosts}/{chroot}", tmp_path / "a.jsonl"
    root = f"/{chroot}/kv/store"
    with kubecoord.connect(url, history=history) as a, kubecoord.connect(url) as b:
        kv = a.storage("store")
        kv.put("x", "1")
        first = zk.exists(root).czxid
        # The root's czxid is cached behind an exists() watch: no further read of the root
        # while nothing happens to it (kazoo's makepath reads parents itself, unwatched).
        client = kv._session.client  # type: ignore[attr-defined]
        exists, reads = client.exists_async, []

        def counted(path: str, watch: object = None) -> object:
            if watch is not None:
                reads.append(path)
            return exists(path, watch=watch)

        monkeypatch.setattr(client, "exists_async", counted)
        assert kv.update("x", "2", expected_version=1) == 2
        kv.put("ns/y", "1")
        kv.delete("ns/y")
        assert reads.count(root) == 0
        zk.delete(root, recursive=True)  # a tool or a person, not a client: a new incarnation next
        b.storage("store").put("x", "b")  # another client re-creates the store
        second = zk.exists(root).czxid
        assert kv.update("x", "3", expected_version=1) == 2  # this client was not told: its cache goes
        zk.delete(root, recursive=True)
        with pytest.raises(kubecoord.KeyNotFoundError):
            kv.update("x", "4")
        assert kv.put("x", "1") == 1  # this client re-creates it
        third = zk.exists(root).czxid
        kv.update("x", "5")
    events = map(json.loads, history.read_text().splitlines())
    writes = [e for e in events if e["event"] in ("put", "updated", "deleted")]
    assert [(e["event"], e.get("key"), e["version"], e.get("store_incarnation")) for e in writes] == [
        ("put", "x", 1, str(first)),
        ("updated", "x", 2, str(first)),
        ("put", "ns/y", 1, str(first)),
        ("deleted", "ns/y", 1, str(first)),
        ("updated", "x", 2, str(second)),
        ("put", "x", 1, str(third)),
        ("updated", "x", 2, str(third)),
    ]
    assert len({first, second, third}) == 3


@pytest.mark.parametrize("how", ["resign", "close"])
def test_a_leader_that_resigns_after_its_session_proven_life_ran_out_logs_when_it_lost(
    zookeeper_server: ZooKeeperServer, chroot: str, tmp_path: Path, how: str
) -> None:
    """A leader resumed from a pause longer than its session may resign (or close) before
    kazoo has noticed anything: its leadership ended when the session's proven life did,
    and the log must say so (a ``lost`` with that valid_until), not a ``resigned`` now —
    a soak's group-coordinator member logged ``resigned`` after a 5 s SIGSTOP while its
    successor had led for a second. The pause is the session's alive_until moved back."""
    history = tmp_path / "a.jsonl"
    coord = kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}", history=history)
    try:
        election = coord.leader_election("svc")
        assert election.nominate("a")
        eventually(lambda: election.is_leader("a"))
        time.sleep(0.5)  # the election's own reads after nominating are answered
        session = coord.session  # type: ignore[attr-defined]
        session.alive_until = time.monotonic() - 2.0  # as if paused: the proof of life ran out 2 s ago
        assert not election.is_leader("a")
        # At once: an answer to a ping (every few seconds) would prove the session alive again.
        if how == "resign":
            election.resign("a")
        else:
            election.close()
    finally:
        coord.close()
    last = [json.loads(line) for line in history.read_text().splitlines()][-1]
    assert last["event"] == "lost"
    ended, logged = (dt.datetime.fromisoformat(last[f].replace("Z", "+00:00")).timestamp()
                     for f in ("valid_until", "ts"))
    assert logged - ended >= 1.5


def test_lock_tokens_increase_across_a_deletion_of_the_locks_parent(
    zookeeper_server: ZooKeeperServer, zk: KazooClient, chroot: str
) -> None:
    """Deleting /CHROOT/elections/NAME resets its sequence numbers (the next node is
    ...__lock__0000000000 again), but a token is the holding node's czxid: the ensemble's
    transaction id, which no deletion resets."""
    url = f"zookeeper://{zookeeper_server.hosts}/{chroot}"
    path = f"/{chroot}/elections/nightly"
    tokens: list[int] = []
    sequences: list[str] = []
    for _ in range(2):
        for holder in ("pod-a", "pod-b"):
            with kubecoord.connect(url) as coord, coord.lock("nightly", id=holder) as lock:
                assert lock.token is not None
                tokens.append(lock.token)
                sequences.extend(node[-10:] for node in zk.get_children(path))
        zk.delete(path, recursive=True)
    assert sequences[0] == sequences[2] == "0000000000"  # the parent's counter restarted ...
    assert tokens == sorted(set(tokens))  # ... the tokens did not
