"""EtcdCoordinator: one transport, one lease session, one dispatcher, one event log, its handles."""

from __future__ import annotations

import itertools
from typing import Any

from kubecoord import validation
from kubecoord._core.handles import SessionCoordinator
from kubecoord._internal.dispatch import Dispatcher
from kubecoord.api import GroupMembership, LeaderElection, ListenerRegistry, Storage
from kubecoord.backends.etcd.context import EtcdContext
from kubecoord.backends.etcd.election import EtcdElection
from kubecoord.backends.etcd.errors import translating
from kubecoord.backends.etcd.kv import EtcdListenerRegistry, EtcdStorage, store_root
from kubecoord.backends.etcd.membership import EtcdGroup
from kubecoord.backends.etcd.options import Options
from kubecoord.backends.etcd.outcomes import WriteMarkers
from kubecoord.backends.etcd.session import LeaseSession
from kubecoord.backends.etcd.transport import Transport, b64, prefix_end
from kubecoord.capabilities import Purgeable
from kubecoord.history import EventLog
from kubecoord.wire.events import Primitive

_numbers = itertools.count(1)


class _Closing:
    """What SessionCoordinator.close() closes last: the lease (revoked), then the transport."""

    def __init__(self, session: LeaseSession, transport: Transport) -> None:
        self._session, self._transport = session, transport

    def close(self) -> None:
        self._session.close(revoke=True)
        self._transport.close()


class EtcdCoordinator(SessionCoordinator, Purgeable):
    backend = "etcd"
    context: EtcdContext

    def __init__(self, hosts: list[tuple[str, int]], root: str, options: Options, events: EventLog) -> None:
        self.crashed = False
        self.root = root
        self.options = options
        self.events = events
        self.dispatcher = Dispatcher(f"etcd-{next(_numbers)}")
        transport = Transport(hosts, options)
        with self._unwound_on_failure(transport.close), translating():
            transport.authenticate()
            lease = LeaseSession(transport, options)
        self.session = _Closing(lease, transport)
        self.context = EtcdContext(transport, lease, self.dispatcher, events, options, root)
        self._markers = WriteMarkers(self.context)
        super().__init__(handle_owner=self.context)

    def _open_leader_election(self, service: str, **options: Any) -> LeaderElection:
        if not options:
            return EtcdElection(self.context, service)
        timings = self.options.with_timings(**options)  # checked before any request
        with translating():
            return EtcdElection(self.context, service, timings=timings)

    def _open_group_membership(self, group: str) -> GroupMembership:
        return EtcdGroup(self.context, group)

    def _open_storage(self, name: str) -> Storage:
        return EtcdStorage(self.context, name, self._markers)

    def _open_listener_registry(self, name: str) -> ListenerRegistry:
        return EtcdListenerRegistry(self.context, name)

    def purge(self, primitive: str, name: str) -> int:
        """Delete every key of one election, group or store; returns how many keys went
        (kubecoord.capabilities.Purgeable; live holders and members see theirs end)."""
        name = validation.check_name(name, "name")
        prefixes = {
            Primitive.LEADER_ELECTION: [f"{self.root}{name}/"],
            Primitive.GROUP: [self.context.internal("groups", name) + "/"],
            Primitive.KV: [store_root(self.context, name) + "/"],
        }[primitive]
        deleted = 0
        with translating():
            for prefix in prefixes:
                answer = self.context.transport.call(
                    "kv/deleterange", {"key": b64(prefix), "range_end": prefix_end(prefix)}, idempotent=True
                )
                deleted += int(answer.get("deleted", 0))
            if primitive == Primitive.KV:
                root = store_root(self.context, name)
                self.context.transport.call("kv/deleterange", {"key": b64(root)}, idempotent=True)
        return deleted

    def check_open(self) -> None:
        self.context.check_open()

    def simulate_crash(self) -> None:
        """Stop as a process killed with -9 would: no resign, no leave, no revoke, no
        callbacks. What it held goes when its lease's TTL runs out. kubecoord.testing.crash()."""
        if self._crash_handles(self.context):
            self.context.session.close(revoke=False)
            self.context.transport.close()
            self.events.close()
