"""Multi-process failure tests, on the API emulator and on the real kube-apiserver (the
``cluster`` fixture): each client a real process with its own coordinator and its own
service-account token, so the server attributes every request (the emulator's request
record, the real server's audit log). Lease 2 s, renew deadline 1.5 s, retry 0.5 s."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

import kubecoord
from kubecoord_testkit.faults import ThreadedFaultProxy

from .clusters import Cluster
from .processes import Child, Children

pytestmark = pytest.mark.slow

LEASE_DURATION = 2.0
TERM_LEASE = 8.0
KILL_FAILOVERS = {"emulator": 12, "real": 6}
"""The real server's share of make test's time is smaller (its tier's budget is 4 min): 6
failovers there, with kills landing at different moments of a term; 20 on the emulator."""
CAS_ROUNDS = {"emulator": 25, "real": 15}
TERM_ROUNDS = {"emulator": 3, "real": 2}
START_BUDGET = 90.0
"""Seconds a spawned candidate may take to nominate (Python's start and the client's imports
took over 30 s at load 20-30); leadership deadlines count from then."""


@pytest.fixture(scope="module")
def client_role(cluster: Cluster) -> Iterator[None]:
    """While this module runs, every service account of the namespace may use Leases and
    ConfigMaps there (removed afterwards: other folders test denials in "default")."""
    role = cluster.grant_namespace_clients()
    yield
    cluster.revoke(role)


@pytest.fixture
def children(cluster: Cluster, tmp_path: pathlib.Path, client_role: None) -> Iterator[Children]:
    started = Children(cluster, tmp_path)
    yield started
    started.close()


def _wait_leader(cluster: Cluster, service: str, candidates: list[Child], *, other_than: str | None = None,
                 timeout: float = 30) -> Child:
    """The candidate leading ``service`` within ``timeout`` s of every candidate running for it
    (a process just spawned on a loaded machine may take tens of seconds to import and
    nominate: START_BUDGET; one that exits first fails the wait at once)."""
    for child in candidates:
        child.wait_for(lambda line: line["event"] == "nominated", timeout=START_BUDGET)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = cluster.holder(service)
        for child in candidates:
            if held and held[0] == child.name != other_than and child.leading():
                return child
        time.sleep(0.03)
    raise AssertionError(f"no leader other than {other_than!r}; lease: {cluster.holder(service)}")


def _terms(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per leadership term: member, epoch, acquired ts, last valid_until (holder's view)."""
    terms: list[dict[str, Any]] = []
    for event in history:
        if event["event"] == "acquired":
            terms.append({"member": event["member"], "epoch": event["epoch"], "start": event["ts"],
                          "valid_until": event["valid_until"]})
        elif event["event"] == "renewed" and terms and terms[-1]["member"] == event["member"]:
            terms[-1]["valid_until"] = event["valid_until"]
    return terms


def _intervals(children: Children) -> list[tuple[float, float, str]]:
    """Leadership intervals from each process's own point of view: is_leader() True until it
    turned False or the process was killed."""
    intervals = []
    for child in children:
        start = None
        for line in child.lines:
            if line["event"] == "is_leader" and line["value"] and start is None:
                start = line["t"]
            elif line["event"] == "is_leader" and not line["value"] and start is not None:
                intervals.append((start, line["t"], child.name))
                start = None
        if start is not None:
            intervals.append((start, child.killed_at or time.time(), child.name))
    return sorted(intervals)


def _assert_no_overlap(intervals: list[tuple[float, float, str]]) -> None:
    for (_, end, who), (start, _, next_who) in itertools.pairwise(intervals):
        assert start >= end, f"{next_who} led from {start} while {who} led until {end}"


def _history(folder: pathlib.Path) -> list[dict[str, Any]]:
    # A line is complete once its newline is written; a writer may be half-way through the last one.
    lines = [line for path in folder.glob("*.jsonl") for line in path.read_text().split("\n")[:-1]]
    events = [json.loads(line) for line in lines if line]
    return sorted(events, key=lambda e: (e["ts"], e["seq"]))


def test_single_leader_and_increasing_epochs_across_kill_9_failovers(
    cluster: Cluster, children: Children, tmp_path: pathlib.Path
) -> None:
    service = f"kill-{uuid.uuid4().hex[:8]}"
    serial = iter(range(1000))

    def spawn() -> Child:
        name = f"p{next(serial)}-{uuid.uuid4().hex[:4]}"
        return children.start(name, "elect", service, name, str(tmp_path / f"{name}.jsonl"))

    live = [spawn() for _ in range(3)]
    leader = _wait_leader(cluster, service, live)
    failovers = KILL_FAILOVERS[cluster.kind]
    for _ in range(failovers):
        leader.kill()
        live.remove(leader)
        live.append(spawn())
        leader = _wait_leader(cluster, service, live, other_than=leader.name)

    # The safety rule from every process's own point of view.
    intervals = _intervals(children)
    assert len(intervals) >= failovers + 1
    _assert_no_overlap(intervals)

    # The same from the event logs: each term starts after the previous holder's own
    # valid_until, and epochs strictly increase.
    terms = sorted(_terms(_history(tmp_path)), key=lambda t: t["start"])
    assert len(terms) >= failovers - 1  # a process killed right after acquiring may not have flushed its log
    epochs = [term["epoch"] for term in terms]
    assert epochs == sorted(set(epochs)), epochs
    for previous, current in itertools.pairwise(terms):
        assert current["start"] >= previous["valid_until"], (previous, current)


def test_a_paused_leader_knows_it_lost_before_writing_anything(
    cluster: Cluster, children: Children, tmp_path: pathlib.Path
) -> None:
    service = f"stop-{uuid.uuid4().hex[:8]}"
    live = [children.start(f"s{i}", "elect", service, f"s{i}", str(tmp_path / f"s{i}.jsonl")) for i in range(3)]
    paused = _wait_leader(cluster, service, live)
    held = cluster.holder(service)
    assert held is not None
    paused_epoch = held[1]
    paused.signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    successor = _wait_leader(cluster, service, [c for c in live if c is not paused])
    time.sleep(max(0.0, LEASE_DURATION + 0.5 - (time.monotonic() - stopped_at)))

    since = cluster.mark()
    mark = len(paused.lines)
    paused.signal(signal.SIGCONT)
    first_flag = paused.wait_for(lambda line: line["event"] == "is_leader", start=mark, timeout=10)
    paused.wait_for(lambda line: line["event"] == "leader", start=mark, timeout=10)
    time.sleep(1.0)  # let it run a while: renewal period twice over

    after = paused.lines[mark:]
    assert paused.lines[first_flag]["value"] is False
    assert not any(line["event"] == "is_leader" and line["value"] for line in after)
    first_report = next(line for line in after if line["event"] == "leader")
    assert first_report["value"] != paused.name
    assert cluster.writes(cluster.service_account_user(paused.name), since) == []
    held = cluster.holder(service)
    assert held is not None and held[0] == successor.name and held[1] > paused_epoch


def test_four_processes_of_versioned_writers_lose_no_update(cluster: Cluster, children: Children) -> None:
    store, rounds = f"cas-{uuid.uuid4().hex[:8]}", CAS_ROUNDS[cluster.kind]
    admin = str(cluster.admin_kubeconfig)
    with kubecoord.connect(cluster.url, kubeconfig=admin) as coordinator:
        coordinator.storage(store).put("counter", "0")
        writers = [children.start(f"w{i}-{store}", "write", store, f"w{i}", str(rounds)) for i in range(4)]
        for writer in writers:
            writer.wait_for(lambda line: line["event"] == "done", timeout=120)
        kv = kubecoord.connect(cluster.url, kubeconfig=admin).storage(store)
        counter = kv.fetch_versioned("counter").result()
        assert counter is not None
        assert (counter.value, counter.version) == (str(4 * rounds), 4 * rounds + 1)
        for i in range(4):
            own = kv.fetch_versioned(f"own/w{i}").result()
            assert own is not None and (own.value, own.version) == (str(rounds), rounds + 1)
        kv.close()


def test_sigterm_releases_and_a_follower_takes_over_without_waiting_for_expiry(
    cluster: Cluster, children: Children, tmp_path: pathlib.Path
) -> None:
    service = f"term-{uuid.uuid4().hex[:8]}"
    serial = iter(range(100))
    # A long lease, so that a takeover by expiry (>= 8 s after the last renewal) cannot pass
    # for one by release, however slowly a loaded machine runs the processes.
    env = {**os.environ, "KUBECOORD_TIMINGS": f"{TERM_LEASE},6,1"}

    def spawn() -> Child:
        name = f"t{next(serial)}-{uuid.uuid4().hex[:4]}"
        return children.start(name, "elect", service, name, str(tmp_path / f"{name}.jsonl"), env=env)

    live = [spawn() for _ in range(3)]
    leader = _wait_leader(cluster, service, live)
    rounds = TERM_ROUNDS[cluster.kind]
    for _ in range(rounds):
        # Every follower must be running for election before the release it should act on
        # (a process just spawned on a loaded machine may still be importing).
        for child in live:
            child.wait_for(lambda line: line["event"] == "nominated", timeout=60)
        leader.signal(signal.SIGTERM)
        assert leader.process.wait(30) == 0
        leader.wait_for(lambda line: line["event"] == "closed", timeout=5)
        live.remove(leader)
        live.append(spawn())
        successor = _wait_leader(cluster, service, live, other_than=leader.name)
        # Without the release the successor would wait out a Lease it last saw renewed at
        # the leader's last renewal: it took over before that Lease could have expired.
        # The event log is written by a background thread: the successor may hold the Lease
        # a moment before its "acquired" line reaches the file.
        deadline = time.monotonic() + 10
        while True:
            history = _history(tmp_path)
            renewals = [e for e in history if e["member"] == leader.name and e["event"] in ("acquired", "renewed")]
            acquired = [e for e in history if e["member"] == successor.name and e["event"] == "acquired"]
            if (renewals and acquired) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert renewals and acquired
        assert _seconds(acquired[-1]["ts"]) < _seconds(renewals[-1]["ts"]) + TERM_LEASE, (renewals[-1], acquired)
        leader = successor
    _assert_no_overlap(_intervals(children))
    terms = sorted(_terms(_history(tmp_path)), key=lambda t: t["start"])
    epochs = [term["epoch"] for term in terms]
    assert len(terms) == rounds + 1 and epochs == sorted(set(epochs)), terms


def test_a_leader_whose_connection_hangs_steps_down_before_another_leads(
    cluster: Cluster, children: Children, tmp_path: pathlib.Path
) -> None:
    service = f"hang-{uuid.uuid4().hex[:8]}"
    config = children.kubeconfig("h0")
    document = yaml.safe_load(config.read_text())
    server = document["clusters"][0]["cluster"]["server"]
    scheme, _, address = server.partition("://")
    host, _, port = address.rstrip("/").rpartition(":")
    with ThreadedFaultProxy((host, int(port))) as proxy:
        # TLS passes through the proxy untouched: the real server's certificate names 127.0.0.1.
        document["clusters"][0]["cluster"]["server"] = f"{scheme}://{proxy.address}"
        config.write_text(yaml.safe_dump(document))
        hung = children.start("h0", "elect", service, "h0", str(tmp_path / "h0.jsonl"), kubeconfig=config)
        _wait_leader(cluster, service, [hung])
        others = [children.start(f"h{i}", "elect", service, f"h{i}", str(tmp_path / f"h{i}.jsonl")) for i in (1, 2)]
        for other in others:
            other.wait_for(lambda line: line["event"] == "nominated")
        mark = len(hung.lines)
        proxy.hold()  # requests and watch events stall: no error, no reset, just silence
        successor = _wait_leader(cluster, service, others)
        stepped_down = hung.wait_for(lambda line: line["event"] == "is_leader" and not line["value"], start=mark)
        took_over = successor.wait_for(lambda line: line["event"] == "is_leader" and line["value"])
        # The hung leader's own view turned false before the successor's turned true.
        assert hung.lines[stepped_down]["t"] <= successor.lines[took_over]["t"]
        # From here on a write by the hung leader would be stale: the successor leads. A
        # renewal the server took just before the hold, whose answer the proxy kept, is not
        # (a fresh-clone run at load 28 saw one when the mark was taken before the hold).
        since = cluster.mark()
        proxy.release()  # whatever it had sent meanwhile now reaches the server
        time.sleep(1.5)  # three renew periods: a stale write would land now
        assert cluster.holder(service) is not None and cluster.holder(service)[0] == successor.name  # type: ignore[index]
        assert not hung.leading()
        written = [w for w in cluster.writes(cluster.service_account_user("h0"), since) if w[3] and w[3] < 300]
        assert written == [], written
    _assert_no_overlap(_intervals(children))


def _seconds(rfc3339: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()
