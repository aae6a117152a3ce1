"""The etcd:// backend, through etcd3gw (etcd's JSON gateway; imported only inside this package).

URL form::

    etcd://HOST[:PORT][,HOST[:PORT]...][/PREFIX]

PORT defaults to 2379. Without a PREFIX, elections and locks use exactly the keys of etcd's
own recipes: the election or lock NAME is the prefix ``NAME/`` that ``etcdctl elect NAME``
and ``etcdctl lock NAME`` use. With PREFIX (segments of ``[A-Za-z0-9._-]`` separated by
'/'), every key starts with ``PREFIX/``: kubecoord's NAME is etcdctl's ``PREFIX/NAME``.
kubecoord's own data lives under ``[PREFIX/]_kubecoord/`` (no election name starts with
'_'). Usage::

    coord = kubecoord.connect("etcd://etcd1:2379,etcd2:2379,etcd3:2379/billing", lease_duration=10)

Options (keyword arguments of connect()):

==================  ============================  ==============================================
option              default                       meaning
==================  ============================  ==============================================
lease_duration      10                            whole seconds >= 2: the TTL of the
                                                  coordinator's one lease; after a crash, what it
                                                  held goes this long after its last keep-alive
renew_deadline      (lease_duration - 1) x 0.75   seconds a holder acts after the last answered
                                                  keep-alive it sent; < lease_duration - 1
retry_period        renew_deadline / 4            seconds between keep-alives
request_timeout     5.0                           seconds any one request may take, over all
                                                  endpoints tried
username            None                          etcd user (with ``password``): an auth token
password            None                          is requested at connect, renewed when refused
tls                 None                          https: {"ca_file", "certfile", "keyfile"}
                                                  (paths; a client certificate is optional)
max_value_bytes     1 MiB                         largest value a store accepts
==================  ============================  ==============================================

leader_election(name, lease_duration=, renew_deadline=, retry_period=) gives that
election's candidates a lease of their own with those timings.

The layout and the rules: election.py (etcd's concurrency.Election and Mutex: a key per
candidate on its lease, the lowest create revision leads, the epoch is that revision),
membership.py, kv.py, outcomes.py (a lost answer resolved by a marker key), session.py
(the one lease and its keep-alive deadline), watches.py (watches resumed at the last
revision seen), transport.py (the requests and how their failures are sorted).

Guarantees: one leader or holder at a time, decided by create revisions; is_leader() and
is_held() turn False before the lease can expire on the server; epochs and tokens strictly
increase (etcd's revisions only grow); per-key versions +1 per write (etcd's own); a write
whose answer was lost is resolved by reading its marker, else OutcomeUnknownError, never
sent again blindly. Not guaranteed: anything when etcd's clocks run much faster than the
clients'; that an etcdctl peer stops in time (etcdctl elect keeps leading after its
lease could have expired while it was cut off); that a key deleted behind a holder's back
is noticed before its successor acts (the watch tells it on its next event).
Real etcd servers for tests and benchmarks are in kubecoord_testkit.servers.etcd.
"""

from __future__ import annotations

from typing import Any

from kubecoord.backends.etcd.coordinator import EtcdCoordinator
from kubecoord.backends.etcd.options import check_hosts, check_prefix, parse
from kubecoord.connect import BackendURL
from kubecoord.history import HistoryTarget, open_event_log


def connect(url: BackendURL, *, history: HistoryTarget = None, **options: Any) -> EtcdCoordinator:
    """The ``kubecoord.backends`` entry point for etcd://."""
    hosts = check_hosts(url.location)
    root = check_prefix(url.path)
    parsed = parse(options)
    events = open_event_log(history, backend="etcd", namespace=root.rstrip("/"))
    return EtcdCoordinator(hosts, root, parsed, events)


__all__ = ["EtcdCoordinator", "connect"]
