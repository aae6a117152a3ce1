"""A kubecoord leader whose connection to Cassandra is delayed, held or cut (the testkit's
fault proxy between it and the node), with a second candidate connected directly: never
two leaders at once in their own logs, epochs increasing, and the proxied candidate back
in the running after the fault heals."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

import kubecoord
from kubecoord_testkit.faults import ThreadedFaultProxy
from tests.helpers import eventually

from .processes import assert_intervals_apart, intervals_in, read_events
from .timings import SESSION_TIMEOUT, TIMINGS


def _host(url: str) -> tuple[str, int]:
    address, _, port = url.split("//")[1].split("/")[0].split(",")[0].rpartition(":")
    return address, int(port)


@pytest.mark.slow
def test_a_leader_behind_a_delayed_held_and_cut_connection_never_overlaps(cassandra_url: str, tmp_path: Path) -> None:
    keyspace = cassandra_url.rsplit("/", 1)[1]
    service = f"proxy-{uuid.uuid4().hex[:8]}"
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("a", "b")}
    with ThreadedFaultProxy(_host(cassandra_url)) as proxy:
        proxied_url = f"cassandra://{proxy.address}/{keyspace}"
        a_coordinator = kubecoord.connect(proxied_url, history=str(logs["a"]), **TIMINGS)
        b_coordinator = kubecoord.connect(cassandra_url, history=str(logs["b"]), **TIMINGS)
        try:
            a, b = a_coordinator.leader_election(service), b_coordinator.leader_election(service)
            assert a.nominate("a")
            assert not b.nominate("b")
            # Delay: 0.2 s each way, renewals still land within the deadline.
            proxy.delay(0.2)
            time.sleep(2)
            assert a.is_leader("a") and not b.is_leader()
            proxy.delay(0)
            # Hold: nothing passes; a must stop leading before b can start.
            proxy.hold()
            eventually(lambda: b.is_leader("b"), SESSION_TIMEOUT * 4)
            assert not a.is_leader()
            proxy.release()
            eventually(lambda: (a.get_leader() or kubecoord.Leader("", "", 0)).id == "b", SESSION_TIMEOUT * 4)
            # b resigns: a (through the proxy) takes over; then a's connections are cut.
            b.resign("b")
            eventually(lambda: a.is_leader("a"), SESSION_TIMEOUT * 4)
            proxy.cut()
            eventually(lambda: a.is_leader("a") or b.is_leader("b"), SESSION_TIMEOUT * 4)
            time.sleep(SESSION_TIMEOUT)
            assert a.is_leader() != b.is_leader()
        finally:
            proxy.heal()
            a_coordinator.close()
            b_coordinator.close()
    found = [
        interval for name, log in logs.items() for interval in intervals_in(read_events(log), name, member=name)
    ]
    intervals = assert_intervals_apart(found)
    assert {who for *_, who in intervals} == {"a", "b"}
