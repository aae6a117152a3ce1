"""ZooKeeperCoordinator: one kazoo session, one dispatcher, one event log, its handles."""

from __future__ import annotations

import itertools
import re
from typing import Any

from kubecoord import validation
from kubecoord._core.handles import ContextHandles, HandleTypes, SessionCoordinator
from kubecoord._internal.dispatch import Dispatcher
from kubecoord.api import LeaderElection
from kubecoord.backends.zookeeper.context import ZooKeeperContext
from kubecoord.backends.zookeeper.election import ZooKeeperElection
from kubecoord.backends.zookeeper.errors import translating
from kubecoord.backends.zookeeper.kv import ZooKeeperListenerRegistry, ZooKeeperStorage
from kubecoord.backends.zookeeper.membership import ZooKeeperGroup
from kubecoord.backends.zookeeper.options import Options
from kubecoord.backends.zookeeper.session import Session
from kubecoord.capabilities import Purgeable
from kubecoord.errors import InvalidArgumentError
from kubecoord.history import EventLog
from kubecoord.wire.events import Primitive

_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:\d{1,5})?$")
_numbers = itertools.count(1)



def check_hosts(location: str) -> str:
    """HOST[:PORT][,HOST[:PORT]...] from the URL, or InvalidArgumentError."""
    hosts = [host for host in location.split(",") if host]
    if not hosts or any(not _HOST.match(host) for host in hosts):
        raise InvalidArgumentError(
            f"zookeeper URL hosts {location!r} must be HOST:PORT[,HOST:PORT...], e.g. zookeeper://zk1:2181,zk2:2181/app"
        )
    return ",".join(hosts)


class ZooKeeperCoordinator(ContextHandles, SessionCoordinator, Purgeable):

    handle_types = HandleTypes(ZooKeeperGroup, ZooKeeperStorage, ZooKeeperListenerRegistry)
    backend = "zookeeper"
    context: ZooKeeperContext
    session: Session

    def __init__(self, hosts: str, chroot: str, options: Options, events: EventLog) -> None:
        self.chroot = chroot
        self.options = options
        self.events = events
        number = next(_numbers)
        self.dispatcher = Dispatcher(f"zookeeper-{number}")
        self.session = Session(hosts, options, name=str(number))
        self.context = ZooKeeperContext(
            session=self.session, dispatcher=self.dispatcher, events=events, chroot=chroot, options=options
        )
        super().__init__(handle_owner=self.context)
        try:
            self.session.start()
        except BaseException:
            self.context.closed = True
            self.dispatcher.close()
            self.events.close()
            raise

    def _open_leader_election(self, service: str, **options: Any) -> LeaderElection:
        if options:
            raise InvalidArgumentError(
                f"zookeeper backend: leader_election takes no per-handle options (an election lives as long as the "
                f"session: set lease_duration on connect()), got {sorted(options)}"
            )
        return ZooKeeperElection(self.context, service)


    def purge(self, primitive: str, name: str) -> int:
        """Delete every znode of one election, group or store; returns how many went
        (kubecoord.capabilities.Purgeable).

        For the operator's finalizer: a deleted LeaderElection, Group or KVStore resource
        leaves nothing behind in ZooKeeper. Ephemeral znodes of live sessions go too
        (their holders see their leadership or membership end).
        """
        folder = {Primitive.LEADER_ELECTION: "elections", Primitive.GROUP: "groups", Primitive.KV: "kv"}[primitive]
        path = f"{self.chroot}/{folder}/{validation.check_name(name, 'name')}"
        client = self.session.client
        with translating():
            if client.exists(path) is None:
                return 0
            count, pending = 0, [path]
            while pending:
                node = pending.pop()
                count += 1
                pending += [f"{node}/{child}" for child in client.get_children(node)]
            client.delete(path, recursive=True)
        return count

    def check_open(self) -> None:
        self.context.check_open()

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the current session: lets a test force its expiry."""
        return self.session.client.client_id  # type: ignore[no-any-return]

    def simulate_crash(self) -> None:
        """Stop as a process killed with -9 would: no resign, no leave, no callbacks.

        The session stays open on the server until its timeout, then its ephemeral
        znodes (leadership, memberships) go. Used by kubecoord.testing.crash().
        """
        with self._lock:
            if self.context.closed:
                return
            self.context.closed = True
        self.dispatcher.close(timeout=0)
        self.session.crash()
        self.events.close()
