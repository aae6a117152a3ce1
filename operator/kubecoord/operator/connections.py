"""One kubecoord Coordinator per backend, shared by every resource that uses it.

Five hundred LeaderElection resources on the kubernetes backend of one namespace share
one connection; a zookeeper ensemble with one chroot shares one session. A connection
is closed when the last resource using it lets go.

A spec that names a Secret (``spec.etcd.secretName``) is connected with the credentials
it holds (kubecoord.resources.credentials), read with the operator's identity when the
connection is opened: a Secret changed later is used from the next connection (a spec
change, an operator restart).

Guarantee: ``acquire`` either returns a live coordinator or raises a kubecoord error
(BackendUnavailableError when the backend cannot be reached; InvalidArgumentError naming
the Secret when it is missing or unusable, PermissionDeniedError when the operator may not
read it); connect() runs off the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import kubecoord
from kubecoord.api import Coordinator
from kubecoord.errors import BackendUnavailableError, PermissionDeniedError
from kubecoord.operator import fencing, kubeapi
from kubecoord.operator.model import BackendSpec
from kubecoord.resources.credentials import connection_options
from kubecoord.resources.specs import Credentials
from kubecoord.timings import DEFAULT_REQUEST_TIMEOUT

Connector = Callable[[BackendSpec], Coordinator]


def default_connector(spec: BackendSpec) -> Coordinator:
    return kubecoord.connect(spec.url, **connect_options(spec))


def connect_options(spec: BackendSpec) -> dict[str, Any]:
    """What the operator connects to a resource's backend with."""
    options: dict[str, Any] = dict(spec.options)
    if spec.backend == "kubernetes":
        # One watch of kubecoord's Leases and one of the KV ConfigMaps per namespace, shared
        # by every resource there (not one per resource), never other applications' Leases.
        options.setdefault("watch_scope", "managed")
        # The operator has each resource's spec already (BackendSpec carries its timings):
        # no handle needs to read its resource again (one GET per handle, 10,000 at scale).
        options.setdefault("bind_resources", False)
        # Its writes (the group record, expired members' reaping) end within the operator
        # Lease's term, as kubeapi's do (kubecoord.operator.fencing).
        options["request_timeout"] = min(float(options.get("request_timeout", DEFAULT_REQUEST_TIMEOUT)),
                                         fencing.write_timeout())
        if kubeapi.kubeconfig() is not None:
            options["kubeconfig"] = kubeapi.kubeconfig()
    if spec.credentials is not None:
        options.update(connection_options(spec.credentials, read_secret(spec.credentials)))
    return options


def read_secret(credentials: Credentials) -> dict[str, str] | None:
    """The data of the Secret ``credentials`` names (None when it names none or it does not
    exist), with the operator's identity; a kubecoord error when it cannot be read."""
    if credentials.secret is None:
        return None
    where = f"Secret {credentials.namespace}/{credentials.secret} ({credentials.field})"
    try:
        secret = kubeapi.call("GET", f"/api/v1/namespaces/{credentials.namespace}/secrets/{credentials.secret}")
    except kubeapi.ApiException as error:
        if error.status == 404:
            return None
        if error.status == 403:
            raise PermissionDeniedError(f"the operator may not read {where}: {error}") from None
        raise BackendUnavailableError(f"cannot read {where}: {error}") from None
    except OSError as error:  # kubeapi's transport failure
        raise BackendUnavailableError(f"cannot read {where}: {error}") from None
    return dict((secret or {}).get("data") or {})


class Connections:
    def __init__(self, connector: Connector = default_connector) -> None:
        self._connector = connector
        self._lock = threading.Lock()
        self._open: dict[BackendSpec, tuple[Coordinator, int]] = {}

    async def acquire(self, spec: BackendSpec) -> Coordinator:
        with self._lock:
            entry = self._open.get(spec)
            if entry is not None:
                self._open[spec] = (entry[0], entry[1] + 1)
                return entry[0]
        coordinator = await asyncio.to_thread(self._connector, spec)
        with self._lock:
            entry = self._open.get(spec)
            if entry is None:
                self._open[spec] = (coordinator, 1)
                return coordinator
            self._open[spec] = (entry[0], entry[1] + 1)
        await asyncio.to_thread(coordinator.close)  # lost a race with another resource
        return entry[0]

    async def release(self, spec: BackendSpec) -> None:
        with self._lock:
            entry = self._open.get(spec)
            if entry is None:
                return
            coordinator, users = entry
            if users > 1:
                self._open[spec] = (coordinator, users - 1)
                return
            del self._open[spec]
        await asyncio.to_thread(coordinator.close)

    def close_all(self) -> None:
        with self._lock:
            entries, self._open = list(self._open.values()), {}
        for coordinator, _ in entries:
            coordinator.close()


connections = Connections()
"""The operator process's pool."""
