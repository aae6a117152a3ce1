"""The zookeeper:// backend, through kazoo. kazoo is imported only inside this package.

URL form::

    zookeeper://HOST:PORT[,HOST:PORT...]/CHROOT

CHROOT (default ``kubecoord``) is a znode path under which everything lives; each
segment matches ``[A-Za-z0-9_][A-Za-z0-9._-]*``. Usage::

    coord = kubecoord.connect("zookeeper://zk1:2181,zk2:2181/billing", lease_duration=6)

Options (keyword arguments of connect()):

================  ==============================  =============================================
option            default                         meaning
================  ==============================  =============================================
lease_duration    10.0                            the session timeout, in seconds (the one name
                                                  of this timing on every backend); the server
                                                  negotiates it within its
                                                  min/maxSessionTimeout, and the client's
                                                  deadlines follow the negotiated one (a
                                                  warning is logged when it differs). After a
                                                  crash, what the session held (leadership,
                                                  memberships) goes this long after the last
                                                  contact
connect_timeout   15.0                            seconds connect() waits for its ZooKeeper session
request_timeout   lease_duration                  seconds any one request may take
connection_retry  {max_tries: -1, delay: 0.1,     kazoo KazooRetry arguments for reconnecting
                  max_delay: 2}                   (-1: forever)
read_retry        {max_tries: 3, delay: 0.05,     KazooRetry arguments for reads on
                  max_delay: 1}                   ConnectionLoss (writes are never retried)
auth              None                            "USER:PASSWORD" for the digest scheme
acl               open; with auth: creator all    ACL of created znodes: ["SCHEME:ID:PERMS", ...]
                  + world read                    e.g. ["auth::rwcda", "world:anyone:r"]
jute_maxbuffer    1048575                         the servers' jute.maxbuffer (bytes)
max_value_bytes   jute_maxbuffer - 4096           largest value a store accepts
================  ==============================  =============================================

ZooKeeper's elections live as long as the session: ``renew_deadline`` and ``retry_period``
are not options here, and ``leader_election(name)`` takes no per-handle timings (an
election with a lease of its own would need a session of its own); asking for them raises
InvalidArgumentError naming them.

Modules: election.py (ephemeral sequential, kazoo Lock layout), membership.py
(ephemeral member znodes), kv.py and record.py (persistent znodes, versions), watches.py
(level-triggered data/children watches), session.py (the kazoo client and its states),
errors.py (kazoo exceptions -> kubecoord.errors), naming.py (znode names and layout).
Real ZooKeeper servers for tests and benchmarks are in kubecoord_testkit.servers.zookeeper.

Guarantees and non-guarantees are in each module's docstring; docs/backends/zookeeper.md
summarises them.
"""

from __future__ import annotations

from typing import Any

from kubecoord.backends.zookeeper.coordinator import ZooKeeperCoordinator, check_hosts
from kubecoord.backends.zookeeper.naming import chroot_path
from kubecoord.backends.zookeeper.options import parse
from kubecoord.connect import BackendURL
from kubecoord.history import HistoryTarget, open_event_log


def connect(url: BackendURL, *, history: HistoryTarget = None, **options: Any) -> ZooKeeperCoordinator:
    """The ``kubecoord.backends`` entry point for zookeeper://."""
    hosts = check_hosts(url.location)
    chroot = chroot_path(url.path)
    parsed = parse(options)
    events = open_event_log(history, backend="zookeeper", namespace=chroot.lstrip("/"))
    return ZooKeeperCoordinator(hosts, chroot, parsed, events)


__all__ = ["ZooKeeperCoordinator", "connect"]
