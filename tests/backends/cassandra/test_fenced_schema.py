"""Cassandra schema versions 2 and 3: a keyspace made by version 1 (``kv_entries`` without
the ``fences`` and ``created`` columns, kubecoord_schema at 1) is brought to the current
version by connect() — also by several clients at once — and its keys, written before,
take fenced writes afterwards; keys put afterwards carry their incarnation (``created``)
(real Cassandra)."""

from __future__ import annotations

import threading
import uuid

import pytest
from cassandra.cluster import Cluster

import kubecoord
from kubecoord import Fence, FencedError, Versioned
from kubecoord.backends.cassandra.schema import SCHEMA_VERSION
from kubecoord_testkit.servers.cassandra import CassandraServer


def test_a_version_1_keyspace_is_upgraded_and_fences_its_old_keys(cassandra_server: CassandraServer) -> None:
    keyspace = f"kc_v1_{uuid.uuid4().hex[:8]}"
    url = f"cassandra://{cassandra_server.hosts}/{keyspace}"
    with kubecoord.connect(url) as coord:
        coord.storage("old").put("k", "before the upgrade")
    address, _, port = cassandra_server.hosts.split(",")[0].rpartition(":")
    cluster = Cluster([(address, int(port))], protocol_version=5)
    try:
        session = cluster.connect(keyspace)
        # Back to what schema version 1 made: no fences column, version 1 recorded.
        session.execute("ALTER TABLE kv_entries DROP fences", timeout=60)
        session.execute("ALTER TABLE kv_entries DROP created", timeout=60)
        session.execute("INSERT INTO kubecoord_schema (component, version) VALUES ('kubecoord', 1)")
        # Four clients upgrade it at once: each connects (one adds the column, the others
        # find it added, before or after their own ALTER failed).
        upgraded: list[kubecoord.Coordinator] = []
        errors: list[BaseException] = []

        def upgrade() -> None:
            try:
                upgraded.append(kubecoord.connect(url))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=upgrade) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        for coordinator in upgraded:
            coordinator.close()
        assert errors == [] and len(upgraded) == 4
        with kubecoord.connect(url) as coord:
            store = coord.storage("old")
            assert store.update("k", "fenced", fence=Fence("job", 3)) == 2
            with pytest.raises(FencedError):
                store.update("k", "stale", fence=Fence("job", 2))
            assert store.fetch_versioned("k").result() == Versioned("fenced", 2)
            store.put("new", "after the upgrade")
        rows = session.execute("SELECT key, created FROM kv_entries WHERE store = 'old'")
        created = {row.key: row.created for row in rows}
        assert created["k"] is None and created["new"] is not None
        version = session.execute("SELECT version FROM kubecoord_schema WHERE component = 'kubecoord'").one()
        assert version.version == SCHEMA_VERSION == 3
    finally:
        cluster.shutdown()
