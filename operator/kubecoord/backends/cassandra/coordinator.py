"""CassandraCoordinator: one driver session, one dispatcher, one event log, its handles."""

from __future__ import annotations

import itertools
from typing import Any

from kubecoord import validation
from kubecoord._core.handles import ContextHandles, HandleTypes, SessionCoordinator
from kubecoord._internal.dispatch import Dispatcher
from kubecoord.api import LeaderElection
from kubecoord.backends.cassandra import schema
from kubecoord.backends.cassandra.context import CassandraContext
from kubecoord.backends.cassandra.election import CassandraElection
from kubecoord.backends.cassandra.kv import CassandraListenerRegistry, CassandraStorage
from kubecoord.backends.cassandra.membership import CassandraGroup
from kubecoord.backends.cassandra.options import Options
from kubecoord.backends.cassandra.session import Session
from kubecoord.capabilities import Purgeable
from kubecoord.history import EventLog
from kubecoord.wire.events import Primitive

DEFAULT_PORT = 9042
_numbers = itertools.count(1)


def check_hosts(location: str) -> list[tuple[str, int]]:
    """HOST[:PORT][,HOST[:PORT]...] from the URL as (host, port) pairs, or InvalidArgumentError."""
    return validation.check_hosts(location, default_port=DEFAULT_PORT, example="cassandra://db1:9042,db2/coordination")


class CassandraCoordinator(ContextHandles, SessionCoordinator, Purgeable):

    handle_types = HandleTypes(CassandraGroup, CassandraStorage, CassandraListenerRegistry)
    backend = "cassandra"
    context: CassandraContext
    session: Session

    def __init__(self, hosts: list[tuple[str, int]], keyspace: str, options: Options, events: EventLog) -> None:
        self.crashed = False
        self.keyspace = keyspace
        self.options = options
        self.events = events
        self.dispatcher = Dispatcher(f"cassandra-{next(_numbers)}")
        with self._unwound_on_failure():
            self.session = Session(hosts, keyspace, options)
        with self._unwound_on_failure(self.session.close):
            schema.ensure(self.session, options)
        self.context = CassandraContext(self.session, self.dispatcher, events, options, options.timings)
        super().__init__(handle_owner=self.context)

    def _open_leader_election(self, service: str, **timings: Any) -> LeaderElection:
        """A LeaderElection on the row ``service``; timings (lease_duration, renew_deadline,
        retry_period) default to the coordinator's."""
        timed = self.context.options.election_timings(**timings) if timings else self.context.timings
        return CassandraElection(self.context, service, timed)


    def purge(self, primitive: str, name: str) -> int:
        """Delete every row of one election, group or store; returns how many partitions
        held something (0: nothing was left; kubecoord.capabilities.Purgeable).

        For the operator's finalizer: a deleted resource leaves nothing behind in Cassandra
        (live holders and members see their leadership or membership end)."""
        name = validation.check_name(name, "name")
        tables = {
            Primitive.LEADER_ELECTION: [("leader_election", "resource"), ("leader_epochs", "resource")],
            Primitive.GROUP: [("group_members", "grp")],
            Primitive.KV: [("kv_entries", "store")],
        }[primitive]
        found = 0
        for table, column in tables:
            if self.session.execute(f"SELECT {column} FROM {{ks}}.{table} WHERE {column} = ? LIMIT 1", [name]):
                found += 1
            self.session.execute(f"DELETE FROM {{ks}}.{table} WHERE {column} = ?", [name])
        return found

    def check_open(self) -> None:
        self.context.check_open()

    def simulate_crash(self) -> None:
        """Stop as a process killed with -9 would: no resign, no leave, no callbacks. What it
        held (leadership, memberships) expires by its TTL. Used by kubecoord.testing.crash()."""
        if self._crash_handles(self.context):
            self.session.close()
            self.events.close()
