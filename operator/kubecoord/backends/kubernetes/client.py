"""The one place that calls the Kubernetes API, through the official client's ApiClient.

Every request carries a timeout (connect and read), so a hung API server cannot hold a
caller past its deadline; urllib3's own retries are off, so a timeout is a timeout.
Objects travel as plain JSON dicts: the election record converters and the ConfigMap codec
work on the wire form, as client-go's do. Requests are built by the ApiClient (its
configuration: host, TLS, the token and its refresh hook) from a URL path of our own, not
through the generated per-group API classes: importing CoreV1Api with its models costs
~2.5 s of CPU per process, and each of their methods validates its arguments with
pydantic on every call, for nothing a dict body needs.

Errors are translated here and nowhere else:

=====================================  =============================================
what the API or the network did        what callers see
=====================================  =============================================
401, 403                               PermissionDeniedError naming verb and resource
connection refused, connect timeout,   BackendUnavailableError (a write: not sent)
5xx and 429 on a read
a write sent and then: connection      OutcomeUnknownError (the write may have been
reset, read timeout, 5xx                applied; never sent again here)
429 on a write                         BackendUnavailableError (refused, not applied)
404                                    NotFound (internal; callers decide)
409 on create                          AlreadyExists (internal)
409 on update or delete precondition   Conflict (internal): re-read, never overwrite
410 (watch or list too old)            Gone (internal): re-list
400, 422                               InvalidArgumentError with the server's message
=====================================  =============================================

Writes (create, replace, delete) are sent once. A write that reached the connection and
lost its answer is never sent again here: a second PUT carrying the first one's
resourceVersion precondition answers 409 when the first was applied, and a caller that
took that 409 for someone else's write would report its own applied write as refused.
Callers that can resolve the outcome (the KV store reads the shard back, kv.py) do so;
the others see OutcomeUnknownError. Reads are sent a second time when a kept-alive
connection was closed before answering.

The internal exceptions never leave the backend package.
Not guaranteed: a total bound on a request's duration — the read timeout bounds each
wait for data, and watch streams are expected to be long-lived.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import urllib3
from kubernetes import client as k8s
from kubernetes.config.config_exception import ConfigException

from kubecoord.backends.kubernetes.endpoint import Endpoint
from kubecoord.backends.kubernetes.watch_stream import HttpWatch, decode_event, open_watch
from kubecoord.errors import (
    BackendUnavailableError,
    CoordinationError,
    NamespaceNotFoundError,
    OutcomeUnknownError,
)
from kubecoord.wire import api_status

log = logging.getLogger("kubecoord.kubernetes.client")

CONNECT_TIMEOUT = 3.0


class ApiCallError(CoordinationError):
    """Base of the internal outcomes callers branch on; never raised to the user."""


class NotFound(ApiCallError):
    pass


class AlreadyExists(ApiCallError):
    pass


class Conflict(ApiCallError):
    pass


class Gone(ApiCallError):
    pass


@dataclass(frozen=True, slots=True)
class Resource:
    """A namespaced resource type: where its objects live in the API."""

    plural: str
    path: str  # the group/version's URL path: /api/v1, /apis/coordination.k8s.io/v1


LEASES = Resource("leases", "/apis/coordination.k8s.io/v1")
CONFIGMAPS = Resource("configmaps", "/api/v1")

_METHODS = {"get": "GET", "list": "GET", "create": "POST", "update": "PUT", "delete": "DELETE"}
_WRITES = frozenset({"create", "update", "delete"})


class KubeClient:
    """Namespaced get/list/create/replace/delete/watch with timeouts and error translation."""

    def __init__(self, api_client: k8s.ApiClient, namespace: str, *, request_timeout: float) -> None:
        self.namespace = namespace
        self.request_timeout = request_timeout
        self._api_client = api_client
        self._lock = threading.Lock()
        self._watch_endpoint: Endpoint | None = None

    def close(self) -> None:
        self._api_client.rest_client.pool_manager.clear()

    @property
    def identity(self) -> tuple[str, ...]:
        """Who this client is, where: server, credentials and namespace. Two clients with the
        same identity see the same objects (informers.py shares watches between them)."""
        configuration = self._api_client.configuration
        return (
            str(configuration.host), repr(sorted((configuration.api_key or {}).items())),
            str(configuration.cert_file or ""), str(configuration.username or ""), self.namespace,
        )

    # -- verbs --------------------------------------------------------------------------
    def get(self, resource: Resource, name: str, *, timeout: float | None = None) -> dict[str, Any] | None:
        """The object, or None if it does not exist."""
        try:
            return cast(dict[str, Any], self._call("get", resource, name, timeout=timeout))
        except NotFound:
            return None

    def list(
        self, resource: Resource, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """(items, the list's resourceVersion)."""
        result = self._call(
            "list", resource, None, query={"labelSelector": label_selector, "fieldSelector": field_selector},
        )
        return list(result.get("items") or []), str((result.get("metadata") or {}).get("resourceVersion") or "")

    def create(self, resource: Resource, body: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        name = (body.get("metadata") or {}).get("name")
        try:
            created = self._call("create", resource, name, body=body, timeout=timeout)
            return cast(dict[str, Any], created)
        except Conflict as exc:
            raise AlreadyExists(str(exc)) from None
        except NotFound:
            # A create has no object to miss: a 404 means the namespace is not there.
            raise NamespaceNotFoundError(
                f"namespace {self.namespace!r} does not exist (create {resource.plural} {name!r} answered 404)"
            ) from None

    def replace(
        self, resource: Resource, name: str, body: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        """PUT ``body``; its metadata.resourceVersion is the precondition (409 -> Conflict)."""
        replaced = self._call("update", resource, name, body=body, timeout=timeout)
        return cast(dict[str, Any], replaced)

    def delete(
        self, resource: Resource, name: str, *, resource_version: str | None = None, timeout: float | None = None
    ) -> None:
        """Delete ``name``, only if still at ``resource_version`` when given (else Conflict)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if resource_version:
            body["preconditions"] = {"resourceVersion": resource_version}
        self._call("delete", resource, name, body=body, timeout=timeout)

    async def open_watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int,
    ) -> WatchStream:
        """Open a watch from ``resource_version`` on the running event loop (the watch
        multiplexer's, watch_mux.py); iterate ``events()`` of the returned stream."""
        query = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)}
        for key, value in (("resourceVersion", resource_version), ("labelSelector", label_selector),
                           ("fieldSelector", field_selector)):
            if value:
                query[key] = value
        with self._lock:
            if self._watch_endpoint is None:
                self._watch_endpoint = Endpoint.from_api_client(self._api_client)
            endpoint = self._watch_endpoint
        try:
            headers = endpoint.request_headers()
        except ConfigException as exc:  # the in-cluster token refresh hook, as in _call
            raise BackendUnavailableError(
                f"cannot watch {resource.plural} in namespace {self.namespace!r}: credentials unavailable: {exc}"
            ) from None
        status, opened = await open_watch(
            endpoint, f"{resource.path}/namespaces/{self.namespace}/{resource.plural}", query, headers,
            connect_timeout=CONNECT_TIMEOUT, header_timeout=self.request_timeout,
            read_timeout=timeout_seconds + 5.0, what=resource.plural,
        )
        if isinstance(opened, HttpWatch):
            return WatchStream(opened, resource.plural)
        raise translate_status(status, opened.decode(errors="replace"), "watch", resource.plural, None, self.namespace)

    def served(self, group: str, version: str, *, timeout: float | None = None) -> bool:
        """Whether the API server serves ``group/version`` (discovery, which RBAC's default
        system:discovery role lets every authenticated user read): False on 404 only."""
        read_timeout = max(0.05, timeout if timeout is not None else self.request_timeout)
        what = f"{group}/{version}"
        try:
            response = self._request("GET", f"/apis/{group}/{version}", None, None, read_timeout)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            raise translate_status(exc.status, exc.body, "discover", what, None, self.namespace) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise BackendUnavailableError(f"cannot discover {what}: {type(exc).__name__}: {exc}") from None
        except ConfigException as exc:
            raise BackendUnavailableError(f"cannot discover {what}: credentials unavailable: {exc}") from None
        text = _body(response, f"discover {what}", written=False)
        if response.status == 404:
            return False
        if not 200 <= response.status <= 299:
            raise translate_status(response.status, text, "discover", what, None, self.namespace)
        return True

    # -- plumbing -----------------------------------------------------------------------
    def _call(
        self,
        verb: str,
        resource: Resource,
        name: str | None,
        *,
        body: dict[str, Any] | None = None,
        query: dict[str, str | None] | None = None,
        timeout: float | None = None,
    ) -> Any:
        read_timeout = max(0.05, timeout if timeout is not None else self.request_timeout)
        path = f"{resource.path}/namespaces/{{namespace}}/{resource.plural}"
        path_params = {"namespace": self.namespace}
        if verb in ("get", "update", "delete"):
            path, path_params["name"] = path + "/{name}", cast(str, name)
        if verb in ("create", "update", "delete"):
            log.debug("write", extra={"verb": verb, "resource": resource.plural, "object": name})
        # A kept-alive connection that the server or a middlebox closed while idle fails the
        # request sent on it before any answer; urllib3 drops it, so a second attempt goes on
        # a fresh connection. Only for reads: a write's reset cannot be told apart from one
        # after the server applied it (module docstring).
        write = verb in _WRITES
        attempts = 1 if write else 2
        try:
            for attempt in range(1, attempts + 1):
                try:
                    response = self._request(_METHODS[verb], path, body, query, read_timeout, path_params)
                    break
                except urllib3.exceptions.ProtocolError as exc:
                    if attempt == attempts or not _closed_before_answering(exc):
                        raise
        except k8s.ApiException as exc:  # the REST layer's own: TLS errors (status 0), Retry-After
            raise self._failed(exc.status, exc.body, verb, resource, name) from None
        except urllib3.exceptions.ConnectTimeoutError as exc:  # refused, unresolvable, no connection in time
            raise BackendUnavailableError(
                f"cannot {verb} {resource.plural} in namespace {self.namespace!r}: {type(exc).__name__}: {exc}"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            error = BackendUnavailableError if not write else OutcomeUnknownError
            sent = "" if not write else " after sending it (it may have been applied)"
            what = f"{resource.plural} {name!r}" if name else resource.plural
            raise error(
                f"cannot {verb} {what} in namespace {self.namespace!r}{sent}: {type(exc).__name__}: {exc}"
            ) from None
        except ConfigException as exc:
            # The in-cluster loader re-reads the service-account token inside the request (its
            # refresh hook); an empty or unreadable token surfaces here, mid-call.
            raise BackendUnavailableError(
                f"cannot {verb} {resource.plural} in namespace {self.namespace!r}: credentials unavailable: {exc}"
            ) from None
        what = f"{verb} {resource.plural} in namespace {self.namespace!r}"
        text = _body(response, what, written=verb in _WRITES)
        if not 200 <= response.status <= 299:
            raise self._failed(response.status, text, verb, resource, name)
        try:
            return json.loads(text or "{}")
        except ValueError as exc:
            # A write answered 2xx was applied, but its caller cannot go on without the
            # object it wrote: to the caller the outcome is unknown.
            error = OutcomeUnknownError if verb in _WRITES else BackendUnavailableError
            raise error(f"cannot {what}: unreadable answer: {exc}") from None

    def _failed(
        self, status: int | None, body: str | None, verb: str, resource: Resource, name: str | None
    ) -> CoordinationError:
        """The error for an HTTP error status; a write answered with a server error (5xx) may
        have been applied (etcd's request timeout answers 500 after a commit it could not
        confirm), so it is an unknown outcome, as is the REST layer's status 0 (a TLS error,
        which may break a connection after the request went out). 429 (API Priority and
        Fairness) refused it."""
        error = translate_status(status, body, verb, resource.plural, name, self.namespace)
        server_error = not status or status >= 500
        if verb in _WRITES and server_error and type(error) is BackendUnavailableError:
            return OutcomeUnknownError(f"{error} (the write may have been applied)")
        return error

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, query: dict[str, str | None] | None,
        read_timeout: float, path_params: dict[str, str] | None = None,
    ) -> Any:
        """One HTTP request through the ApiClient (host, TLS, credentials and their refresh);
        the answer unread, whatever its status."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        params = self._api_client.param_serialize(
            method, path, path_params=path_params,
            query_params=[(key, value) for key, value in (query or {}).items() if value],
            header_params=headers, body=body, auth_settings=["BearerToken"],
        )
        return self._api_client.call_api(*params, _request_timeout=(min(CONNECT_TIMEOUT, read_timeout), read_timeout))


def _body(response: Any, what: str, *, written: bool) -> str:
    """The answer's body, read to its end (the client reads it lazily, after the status):
    a connection that breaks or times out half-way is BackendUnavailableError, and for a
    write OutcomeUnknownError (the server may have applied it)."""
    try:
        return bytes(response.read() or b"").decode(errors="replace")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        if written:
            raise OutcomeUnknownError(
                f"cannot {what}: the answer broke off ({type(exc).__name__}: {exc}); it may have been applied"
            ) from None
        raise BackendUnavailableError(f"cannot {what}: the answer broke off ({type(exc).__name__}: {exc})") from None


def _closed_before_answering(exc: urllib3.exceptions.ProtocolError) -> bool:
    cause = exc.args[1] if len(exc.args) > 1 else exc.__context__
    return isinstance(cause, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))


def translate_status(
    status: int | None, body: str | None, verb: str, plural: str, name: str | None, namespace: str
) -> CoordinationError:
    """The kubecoord error for an HTTP error status of the API server (wire/api_status.py),
    with this package's internal outcomes for 404, 409 and 410."""
    return api_status.translate_status(
        status, body, verb, plural, name, namespace, internal={404: NotFound, 409: Conflict, 410: Gone}
    )


class WatchStream:
    """The events of one open watch, as dicts {"type": ..., "object": {...}}.

    ``events()`` ends when the server ends the stream (or close() ended it on purpose); a
    read timeout or a broken connection raises BackendUnavailableError; an ERROR event
    with code 410 raises Gone. Used on the event loop's thread only (close() too).
    """

    def __init__(self, http: HttpWatch, plural: str) -> None:
        self._http = http
        self._plural = plural

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        async for line in self._http.lines():
            try:
                event = decode_event(line)
            except ValueError as exc:
                raise BackendUnavailableError(f"watch of {self._plural} broke: {exc}") from None
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                code = status.get("code") if isinstance(status, dict) else None
                if code == 410:
                    raise Gone(f"watch of {self._plural}: {status.get('message', 'resource version too old')}")
                raise translate_status(code, json.dumps(status), "watch", self._plural, None, "")
            yield event

    def close(self) -> None:
        self._http.close()
