"""What observers of a cassandra:// election report, row state by row state: a kubecoord
leader only once its epoch is written, and then with that epoch; a seed-plugin peer with
the last kubecoord epoch (it has none of its own).

The rows are written here by CQL exactly as the states occur: a kubecoord candidate's
holder row between its insert and its epoch (it is acquiring, or died in between), the
same row stamped with its epoch, a seed peer's row. A listener that reads get_leader()
in its callback must never see a kubecoord leader with the previous term's epoch.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from cassandra.cluster import Cluster, Session

import kubecoord
from kubecoord import Leader
from tests.helpers import eventually

from .timings import TIMINGS

KEYSPACE = "kubecoord_test"


@pytest.fixture
def cql(cassandra_url: str) -> Iterator[Session]:
    host, _, port = cassandra_url.split("//")[1].split("/")[0].split(",")[0].rpartition(":")
    cluster = Cluster([(host, int(port or 9042))], protocol_version=5)
    session = cluster.connect(KEYSPACE)
    yield session
    cluster.shutdown()


def test_a_kubecoord_leader_is_reported_only_with_its_own_epoch(cassandra_url: str, cql: Session) -> None:
    service = f"epochs-{uuid.uuid4().hex[:8]}"
    calls: list[tuple[str | None, Leader | None]] = []
    lock = threading.Lock()
    with kubecoord.connect(cassandra_url, **TIMINGS) as coord:
        observer = coord.leader_election(service)

        def listener(leader: str | None) -> None:
            got = observer.get_leader()  # what a user fences with, read in the callback
            with lock:
                calls.append((leader, got))

        observer.add_listener(listener)
        # The previous kubecoord term's epoch, 7, and a candidate k1 between its insert and its epoch.
        cql.execute("INSERT INTO leader_epochs (resource, epoch, tenure) VALUES (%s, 7, %s)", [service, uuid.uuid4()])
        tenure = uuid.uuid4()
        cql.execute(
            "INSERT INTO leader_election (resource, owner, sup_data, tenure, nonce) VALUES (%s, 'k1', '', %s, %s) "
            "USING TTL 60", [service, tenure, uuid.uuid4()],
        )
        assert observer.get_leader() is None  # a read now: nobody leads before k1's epoch is written
        # k1 bumps the epoch row and stamps its row: now it leads, with epoch 8.
        cql.execute("UPDATE leader_epochs SET epoch = 8, tenure = %s WHERE resource = %s", [tenure, service])
        cql.execute(
            "UPDATE leader_election USING TTL 60 SET owner = 'k1', sup_data = '', nonce = %s, tenure = %s, epoch = 8 "
            "WHERE resource = %s", [uuid.uuid4(), tenure, service],
        )
        eventually(lambda: any(leader == "k1" for leader, _ in calls), 30)
        assert observer.get_leader() == Leader("k1", "", 8)
        # k1 goes; a seed peer leads: it has no epoch, the last kubecoord one (8) stands for it.
        cql.execute("DELETE FROM leader_election WHERE resource = %s", [service])
        cql.execute(
            "INSERT INTO leader_election (resource, owner, sup_data) VALUES (%s, 'seed', 'seed') USING TTL 60",
            [service],
        )
        eventually(lambda: any(leader == "seed" for leader, _ in calls), 30)
        assert observer.get_leader() == Leader("seed", "seed", 8)
    with lock:
        reported = list(calls)
    assert all(got is None or got.id != "k1" or got.epoch == 8 for _, got in reported), reported
    assert all(leader != "k1" or (got is not None and got.epoch == 8) for leader, got in reported), reported
