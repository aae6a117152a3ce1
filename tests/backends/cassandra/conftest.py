"""The Cassandra tests: the testkit's session-wide node (cassandra_server) and, for the
fault module, its 3-node cluster; tests/fixtures/cassandra.py makes the keyspace."""
