"""etcd edited by hand behind kubecoord's back, as an operator with etcdctl would: the
current leader's or holder's key deleted, its lease revoked, a foreign key put under the
election's prefix, the coordinator's lease revoked under an election with a lease of its
own. Judged by etcdctl's view of the keys and etcd's create revisions (the epochs)."""

from __future__ import annotations

import json
import pathlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

import kubecoord
from kubecoord.api import Coordinator, Leader, LeaderElection
from kubecoord_testkit.servers.etcd import EtcdCluster

from .conftest import eventually
from .etcdctl import etcdctl, keys, leases
from .timings import TIMINGS


@pytest.fixture
def name() -> str:
    return f"h-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def connect(etcd_server: EtcdCluster) -> Iterator[Callable[..., Coordinator]]:
    """kubecoord.connect(etcd:// without a PREFIX: etcdctl's names); closed at the end."""
    opened: list[Coordinator] = []

    def open_one(**options: object) -> Coordinator:
        coord = kubecoord.connect(f"etcd://{etcd_server.hosts}", **{**TIMINGS, **options})
        opened.append(coord)
        return coord

    yield open_one
    for coord in opened:
        coord.close()



def _revisions(etcd: EtcdCluster, prefix: str) -> dict[str, tuple[int, int]]:
    """key -> (create revision, lease) of every key under ``prefix``, as etcdctl reads them."""
    import base64

    answer = json.loads(etcdctl(etcd, "get", "--prefix", prefix, "-w", "json"))
    return {
        base64.b64decode(kv["key"]).decode(): (int(kv["create_revision"]), int(kv.get("lease", 0)))
        for kv in answer.get("kvs", [])
    }


def _leading_key(etcd: EtcdCluster, name: str, epoch: int | None) -> tuple[str, int]:
    """The key of election ``name`` whose create revision is ``epoch``, and its lease."""
    ((key, (_, lease)),) = ((k, v) for k, v in _revisions(etcd, f"{name}/").items() if v[0] == epoch)
    return key, lease


def _a_leads_b_waits(
    etcd: EtcdCluster, connect: Callable[..., Coordinator], name: str
) -> tuple[LeaderElection, LeaderElection, Leader, str, int]:
    """Candidates a (leading) and b (waiting) of ``name``; a's term, key and lease."""
    a, b = connect().leader_election(name), connect().leader_election(name)
    assert a.nominate("a")
    assert not b.nominate("b")
    old = a.get_leader()
    assert old is not None and old.id == "a"
    return (a, b, old, *_leading_key(etcd, name, old.epoch))


@pytest.mark.parametrize("edit", ["del", "lease revoke"])
def test_a_lock_holder_whose_key_goes_by_hand_leaves_no_key_behind(
    etcd_server: EtcdCluster, connect: Callable[..., Coordinator], name: str, edit: str
) -> None:
    a, b, c = connect(), connect(), connect()
    holder = a.lock(name, id="a")
    assert holder.acquire(timeout=10)
    first = holder.token
    waiter = b.lock(name, id="b")
    won: list[bool] = []
    waiting = threading.Thread(target=lambda: won.append(waiter.acquire(timeout=30)))
    waiting.start()
    eventually(lambda: len(keys(etcd_server, f"{name}/")) == 2, "b never queued")
    key, lease = _leading_key(etcd_server, name, first)
    if edit == "del":
        etcdctl(etcd_server, "del", key)
    else:
        etcdctl(etcd_server, "lease", "revoke", format(lease, "x"))
    waiting.join(30)
    assert won == [True]
    second = waiter.token
    assert second is not None and first is not None and second > first
    eventually(lambda: not holder.is_held(), "a still holds")
    # a's hold ended for good: no key of a's coordinator may stay in the queue.
    eventually(lambda: len(keys(etcd_server, f"{name}/")) == 1, f"a left a key: {keys(etcd_server, f'{name}/')}")
    waiter.release()
    third = c.lock(name, id="c")
    assert third.acquire(timeout=10)  # nothing of a's stands in front of it
    assert third.token is not None and third.token > second
    third.release()


def test_a_leader_whose_key_is_deleted_by_hand_hands_over_and_reenters_behind(
    etcd_server: EtcdCluster, connect: Callable[..., Coordinator], name: str
) -> None:
    a, b, old, key, _ = _a_leads_b_waits(etcd_server, connect, name)
    etcdctl(etcd_server, "del", key)
    eventually(lambda: b.is_leader("b") and not a.is_leader("a"), "b never took over")
    new = b.get_leader()
    assert new is not None and new.id == "b" and new.epoch > old.epoch
    # a re-entered with a new key, behind b's (a higher create revision), on its lease.
    eventually(lambda: len(_revisions(etcd_server, f"{name}/")) == 2, "a never re-entered")
    revisions = _revisions(etcd_server, f"{name}/")
    assert key in revisions and revisions[key][0] > new.epoch  # the same key name, created anew
    b.resign("b")
    eventually(lambda: a.is_leader("a"), "a never led again")
    again = a.get_leader()
    assert again is not None and again.epoch == revisions[key][0] > new.epoch


def test_a_leaders_lease_revoked_by_hand_hands_over_and_it_reenters_on_a_new_lease(
    etcd_server: EtcdCluster, connect: Callable[..., Coordinator], name: str
) -> None:
    a, b, old, key, lease = _a_leads_b_waits(etcd_server, connect, name)
    etcdctl(etcd_server, "lease", "revoke", format(lease, "x"))
    eventually(lambda: b.is_leader("b") and not a.is_leader("a"), "b never took over")
    eventually(lambda: len(_revisions(etcd_server, f"{name}/")) == 2, "a never re-entered")
    revisions = _revisions(etcd_server, f"{name}/")
    assert key not in revisions  # the revoked lease's key is gone for good ...
    ((_, (created, new_lease)),) = ((k, v) for k, v in revisions.items() if v[0] != b.get_leader().epoch)  # type: ignore[union-attr]
    assert new_lease != lease and format(new_lease, "x") in leases(etcd_server)  # ... a re-entered on a new one
    assert created > b.get_leader().epoch > old.epoch  # type: ignore[union-attr]


def test_a_foreign_key_under_the_prefix_waits_its_turn_and_then_leads(
    etcd_server: EtcdCluster, connect: Callable[..., Coordinator], name: str
) -> None:
    a, b = connect().leader_election(name), connect().leader_election(name)
    changes: list[str | None] = []
    b.add_listener(changes.append)
    assert a.nominate("a")
    assert not b.nominate("b")
    etcdctl(etcd_server, "put", f"{name}/foreign", "intruder")  # no lease, the newest key
    time.sleep(1.0)  # the watches have seen it (nothing should change)
    assert a.is_leader("a") and not b.is_leader("b")
    leader = a.get_leader()
    assert leader is not None and leader.id == "a"
    a.resign("a")
    eventually(lambda: b.is_leader("b"), "b never led after a resigned")
    b.resign("b")
    # The foreign key is the oldest left: it leads, as it would for etcdctl elect.
    eventually(lambda: (b.get_leader() or kubecoord.api.Leader("", "", 0)).id == "intruder", "the key never led")
    c = connect().leader_election(name)
    assert not c.nominate("c")
    etcdctl(etcd_server, "del", f"{name}/foreign")
    eventually(lambda: c.is_leader("c"), "c never led after the foreign key went")
    # b's listener hears the change from its own watch, which may deliver after c leads.
    eventually(lambda: [x for x in changes if x is not None][-1] == "c", "b's listener never heard c lead")


def test_an_election_with_its_own_lease_keeps_its_term_when_the_coordinators_lease_is_revoked(
    etcd_server: EtcdCluster, connect: Callable[..., Coordinator], name: str, tmp_path: pathlib.Path
) -> None:
    log = tmp_path / "history.jsonl"
    coord = connect(history=str(log))
    election = coord.leader_election(name, lease_duration=10, renew_deadline=6.0, retry_period=1.0)
    assert election.nominate("a")
    epoch = election.get_leader().epoch  # type: ignore[union-attr]
    store = coord.storage("s")
    store.put(f"{name}-k", "v")  # a marker on the coordinator's lease: that lease, by name
    (marker,) = keys(etcd_server, "_kubecoord/writes/")[-1:] or [""]
    coordinator_lease = marker.split("/")[2]
    (_, (_, own_lease)), = _revisions(etcd_server, f"{name}/").items()
    assert format(own_lease, "x") != coordinator_lease
    before = leases(etcd_server)
    etcdctl(etcd_server, "lease", "revoke", coordinator_lease)
    eventually(lambda: bool(leases(etcd_server) - before), "the coordinator never granted a new lease")
    store.put(f"{name}-k2", "v")  # the coordinator works on its new lease
    assert election.is_leader("a")
    assert election.get_leader().epoch == epoch  # type: ignore[union-attr]
    coord.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    terms = [e["event"] for e in events if e.get("name") == name and e.get("member") == "a"]
    assert terms.count("acquired") == 1 and "lost" not in terms, terms  # one term, never interrupted
