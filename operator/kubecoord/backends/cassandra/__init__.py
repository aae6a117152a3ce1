"""The cassandra:// backend, through cassandra-driver (imported only inside this package).

URL form::

    cassandra://HOST[:PORT][,HOST[:PORT]...]/KEYSPACE

PORT defaults to 9042; KEYSPACE matches ``[A-Za-z][A-Za-z0-9_]{0,47}`` and is created
with its tables when absent (``replication_factor`` / ``replication``), with a schema
version (schema.py). Usage::

    coord = kubecoord.connect("cassandra://db1,db2,db3/coordination", replication_factor=3)

Options (keyword arguments of connect()):

==================  ===========================  ================================================
option              default                      meaning
==================  ===========================  ================================================
lease_duration      10                           whole seconds >= 2: the TTL of election holder
                                                 rows and member rows; after a crash, what the
                                                 process held goes this long after its last write
renew_deadline      (lease_duration - 1) x 0.75  seconds a leader acts without a renewal; must be
                                                 < lease_duration - 1 (TTLs count whole seconds)
retry_period        min(2, lease_duration / 10)  seconds between renewals and between attempts
poll_period         0.5                          seconds between polls of elections, groups and
                                                 stores with listeners: the listener latency
                                                 bound, and how late a takeover can start
consistency         QUORUM                       reads and LWT commits: QUORUM, LOCAL_QUORUM,
                                                 EACH_QUORUM or ALL
serial_consistency  SERIAL                       the Paxos phase of LWTs and the reads that
                                                 resolve their unknown outcomes: SERIAL or
                                                 LOCAL_SERIAL (one datacenter's Paxos)
replication_factor  1                            SimpleStrategy RF of a keyspace created here
replication         None                         a replication map instead, e.g.
                                                 {"class": "NetworkTopologyStrategy", "dc1": 3}
connect_timeout     10.0                         seconds to reach the first node
request_timeout     5.0                          seconds any one statement may take
username, password  None                         PasswordAuthenticator credentials
ssl                 None                         TLS: {"ca_file", "certfile", "keyfile",
                                                 "check_hostname"} (client certificates optional)
max_value_bytes     1 MiB                        largest value a store accepts (at most 8 MiB;
                                                 mind the servers' commitlog segment size)
create_schema       True                         False: never create; a missing schema is an error
==================  ===========================  ================================================

``leader_election(name)`` also takes lease_duration / renew_deadline / retry_period per
handle (checked by the same rules; its holder row's TTL is its lease_duration).

What each statement uses, and why: session.py. The election (election.py,
election_rows.py) shares the seed plugin's ``leader_election`` table and interoperates
with peers that run its statements; membership.py, kv.py: the other primitives.
Cassandra has no watch: polling (``poll_period``) stands in for it, one or two small
reads per election, group or store with listeners per period.

Guarantees (details in each module): one holder at a time, decided by LWT; a holder's
is_leader() turns False before its row can expire; fencing epochs strictly increase across
kubecoord terms, even after expiry; per-key versions +1 per write, by LWT; unknown LWT
outcomes resolved by SERIAL reads, never blind retries. Not guaranteed: anything when the
Cassandra nodes' clocks run at different rates from the clients' (TTLs are judged by them);
that a seed-plugin peer stops in time; listener latency below ``poll_period``.
Real Cassandra servers for tests and benchmarks are in kubecoord_testkit.servers.cassandra.
"""

from __future__ import annotations

from typing import Any

from kubecoord.backends.cassandra.coordinator import CassandraCoordinator, check_hosts
from kubecoord.backends.cassandra.options import parse
from kubecoord.backends.cassandra.schema import check_keyspace
from kubecoord.connect import BackendURL
from kubecoord.history import HistoryTarget, open_event_log


def connect(url: BackendURL, *, history: HistoryTarget = None, **options: Any) -> CassandraCoordinator:
    """The ``kubecoord.backends`` entry point for cassandra://."""
    hosts = check_hosts(url.location)
    keyspace = check_keyspace(url.path)
    parsed = parse(options)
    events = open_event_log(history, backend="cassandra", namespace=keyspace)
    return CassandraCoordinator(hosts, keyspace, parsed, events)


__all__ = ["CassandraCoordinator", "connect"]
