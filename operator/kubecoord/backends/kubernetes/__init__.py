"""The Kubernetes backend: kubernetes://NAMESPACE.

Usage::

    with kubecoord.connect("kubernetes://billing") as coord:     # in a pod, or with a kubeconfig
        le = coord.leader_election("billing-controller")
        le.nominate(os.environ["HOSTNAME"])

URL: ``kubernetes://NAMESPACE``; ``kubernetes://`` uses the pod's namespace in a cluster,
else the kubeconfig context's, else "default". Configuration: in-cluster service account
when running in a pod, else the kubeconfig (config.py).

Options (keyword arguments of kubecoord.connect):

=================  ===========  ===========================================================
option             default      meaning
=================  ===========  ===========================================================
kubeconfig         None         path of a kubeconfig; wins over in-cluster configuration
context            None         kubeconfig context (default: its current-context)
lease_duration     15.0         seconds a follower waits from its last observed change of a
                                Lease before taking over; also a member's time to live
renew_deadline     10.0         seconds a leader acts without a successful renewal
retry_period       2.0          seconds between renewals and member heartbeats
request_timeout    5.0          read timeout of every API request (capped further by the
                                time left until the renew deadline while leading)
max_value_bytes    262144       largest KV value (UTF-8 bytes); at most 1 MiB - 4 KiB
watch_scope        "object"     "object": one watch per election, group and store shard (works with
                                RBAC granted by name); "namespace": one watch of all Leases and one
                                of the KV ConfigMaps per coordinator, shared by every handle;
                                "managed": the same, Leases labelled by kubecoord only (informers.py)
kv_shards          1            ConfigMaps a store is spread over when this client creates it
                                without a KVStore resource (whose sizeLimit decides otherwise);
                                recorded on the store, so the creator's count wins (wire/kv_shards.py)
bind_resources     True         handles read the kubecoord.dev resource of their name for backend,
                                timings and size limit (binding.py); False: the connect() options
                                only, no request (the operator, which has the resources already)
clock              monotonic    a kubecoord._internal.clock.Clock (tests)
=================  ===========  ===========================================================

Timings are validated as client-go validates them (kubecoord.timings): lease_duration >
renew_deadline > 1.2 x retry_period, else InvalidArgumentError. leader_election(name)
also takes lease_duration / renew_deadline / retry_period per handle.

Objects (wire/object_names.py): a Lease per election (client-go LeaseLock compatible,
wire/lease.py), a Lease per group member (membership.py), one or more ConfigMaps per KV
store (kv.py: keys spread over a fixed number of shards of up to 1 MiB each, wire/kv_shards.py). Every write has a
resourceVersion precondition; 409 means re-read. Listeners and reads are fed by shared
informers (shared_informer.py, joining cache.py and reflector.py, as client-go's
tools/cache does), one per election, group and store shard, or one per kind and
namespace (watch_scope; informers.py); every watch of the process is read on one thread
(watch_mux.py, over watch_stream.py).

This package is also the Kubernetes floor the operator stands on: one credential rule
(config.py, the official client's loaders), where and as whom a request goes
(endpoint.py) and one HTTP client with a blocking and an asynchronous face (transport.py:
pykube-ng's requests session; aiohttp on an event loop), with one account of what reached
the server; the backend's verbs and error translation sit on it (client.py). The
kubernetes client is imported only in this package (and by the API emulator and the
operator, for the ApiException type of its errors), pykube-ng only in transport.py.
"""

from __future__ import annotations

from typing import Any

from kubecoord._internal.clock import Clock, MonotonicClock
from kubecoord._internal.dispatch import Dispatcher
from kubecoord.backends.kubernetes import config as cluster_config
from kubecoord.backends.kubernetes.client import KubeClient, translate_status
from kubecoord.backends.kubernetes.config import ClusterConfig
from kubecoord.backends.kubernetes.context import KubernetesContext
from kubecoord.backends.kubernetes.coordinator import KubernetesCoordinator
from kubecoord.backends.kubernetes.endpoint import Endpoint
from kubecoord.backends.kubernetes.informers import InformerPool, check_scope
from kubecoord.backends.kubernetes.kv import DEFAULT_MAX_VALUE_BYTES, MAX_STORE_BYTES
from kubecoord.backends.kubernetes.transport import Answer, Transport, TransportError
from kubecoord.connect import BackendURL
from kubecoord.errors import InvalidArgumentError
from kubecoord.history import HistoryTarget, open_event_log
from kubecoord.timings import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETRY_PERIOD,
    Timings,
)
from kubecoord.wire.kv_shards import check_shards

_ENVELOPE = 4096

__all__ = ["Answer", "ClusterConfig", "Endpoint", "KubernetesCoordinator", "Timings", "Transport", "TransportError",
           "connect", "load_config", "translate_status"]
"""Public. Besides connect() and the coordinator, the Kubernetes floor the operator stands
on too: ``load_config`` (the configuration kubernetes:// resolves — in-cluster,
kubeconfig, context, namespace: the one credential rule), ``Transport`` (the one HTTP
client built from it, with a blocking and an asynchronous face; ``TransportError`` says
whether a failed request reached the server, ``Answer`` is what it got), ``Endpoint``
(where and as whom a request of that configuration goes) and ``translate_status`` (an
API server's error status as a kubecoord error). A second loader or client in the
operator would resolve a different cluster or namespace than the backend for the same
flags, or judge a lost answer differently."""

load_config = cluster_config.load


def connect(url: BackendURL, *, history: HistoryTarget = None, **options: Any) -> KubernetesCoordinator:
    """The ``kubecoord.backends`` entry point for kubernetes://."""
    kubeconfig = options.pop("kubeconfig", None)
    context_name = options.pop("context", None)
    timings = Timings(
        lease_duration=options.pop("lease_duration", DEFAULT_LEASE_DURATION),
        renew_deadline=options.pop("renew_deadline", DEFAULT_RENEW_DEADLINE),
        retry_period=options.pop("retry_period", DEFAULT_RETRY_PERIOD),
    )
    request_timeout = options.pop("request_timeout", DEFAULT_REQUEST_TIMEOUT)
    max_value_bytes = options.pop("max_value_bytes", DEFAULT_MAX_VALUE_BYTES)
    kv_shards = check_shards(options.pop("kv_shards", 1))
    watch_scope = check_scope(options.pop("watch_scope", "object"))
    bind_resources = options.pop("bind_resources", True)
    clock: Clock = options.pop("clock", None) or MonotonicClock()
    if not isinstance(bind_resources, bool):
        raise InvalidArgumentError(f"bind_resources must be True or False, got {bind_resources!r}")
    if options:
        raise InvalidArgumentError(f"kubernetes backend: unknown options {sorted(options)}")
    if url.path:
        raise InvalidArgumentError(f"kubernetes URL {url.raw!r} takes no path: use kubernetes://NAMESPACE")
    if isinstance(request_timeout, bool) or not isinstance(request_timeout, int | float) or request_timeout <= 0:
        raise InvalidArgumentError(f"request_timeout must be a positive number of seconds, got {request_timeout!r}")
    if (
        isinstance(max_value_bytes, bool)
        or not isinstance(max_value_bytes, int)
        or not 0 < max_value_bytes <= MAX_STORE_BYTES - _ENVELOPE
    ):
        raise InvalidArgumentError(
            f"max_value_bytes must be an int from 1 to {MAX_STORE_BYTES - _ENVELOPE}, got {max_value_bytes!r}"
        )
    cluster = cluster_config.load(url.location, kubeconfig=kubeconfig, context=context_name)
    client = KubeClient(Transport(cluster.configuration), cluster.namespace, request_timeout=float(request_timeout))
    context = KubernetesContext(
        client=client,
        informers=InformerPool(client, clock, scope=watch_scope),
        clock=clock,
        dispatcher=Dispatcher(f"kubernetes-{cluster.namespace}"),
        events=open_event_log(history, backend="kubernetes", namespace=cluster.namespace),
        timings=timings,
        max_value_bytes=max_value_bytes,
        kv_shards=kv_shards,
        bind_resources=bind_resources,
    )
    return KubernetesCoordinator(context)
