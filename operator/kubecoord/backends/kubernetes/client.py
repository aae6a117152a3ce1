"""The backend's namespaced verbs on the Kubernetes API, over the floor's one transport
(transport.py: pykube-ng's requests session, credentials per request from the one rule).

Every request carries a timeout (connect and read), so a hung API server cannot hold a
caller past its deadline; the transport sends each request once, so a timeout is a
timeout. Objects travel as plain JSON dicts: the election record converters and the
ConfigMap codec work on the wire form, as client-go's do. Requests are built from a URL
path of our own, not through the official client's generated per-group API classes:
importing CoreV1Api with its models costs ~2.5 s of CPU per process, and each of their
methods validates its arguments with pydantic on every call, for nothing a dict body needs.

Errors are translated here and nowhere else:

=====================================  =============================================
what the API or the network did        what callers see
=====================================  =============================================
401, 403                               PermissionDeniedError naming verb and resource
connection refused, connect timeout,   BackendUnavailableError (a write: not sent)
5xx and 429 on a read
a write sent and then: connection      OutcomeUnknownError (the write may have been
reset, read timeout, TLS error, an      applied; never sent again here)
answer cut short, 5xx
429 on a write                         BackendUnavailableError (refused, not applied)
404                                    NotFound (internal; callers decide)
409 on create                          AlreadyExists (internal)
409 on update or delete precondition   Conflict (internal): re-read, never overwrite
410 (watch or list too old)            Gone (internal): re-list
400, 422                               InvalidArgumentError with the server's message
2xx whose body is not the verb's       a read: BackendUnavailableError; a write:
object (not JSON, nested deeper than   OutcomeUnknownError (applied, its answer
the parser reads, a list or scalar,    unreadable)
items or metadata that are no objects)
a watch line that is no such event     BackendUnavailableError (the watch broke)
=====================================  =============================================

Writes (create, replace, delete) are sent once. A write that reached the connection and
lost its answer is never sent again here: a second PUT carrying the first one's
resourceVersion precondition answers 409 when the first was applied, and a caller that
took that 409 for someone else's write would report its own applied write as refused.
Callers that can resolve the outcome (the KV store reads the shard back, kv.py) do so;
the others see OutcomeUnknownError. Reads are sent a second time when a kept-alive
connection was closed before answering. What reached the server is the transport's
account (TransportError.sent: False only for a refused connection, a connect timeout or
credentials the refresh hook could not read).

The internal exceptions never leave the backend package.
Not guaranteed: a total bound on a request's duration — the read timeout bounds each
wait for data, and watch streams are expected to be long-lived.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

from kubernetes.config.config_exception import ConfigException

from kubecoord.backends.kubernetes.transport import Answer, Transport, TransportError
from kubecoord.backends.kubernetes.watch_stream import HttpWatch, decode_event, open_watch
from kubecoord.errors import (
    BackendUnavailableError,
    CoordinationError,
    NamespaceNotFoundError,
    OutcomeUnknownError,
)
from kubecoord.wire import api_status
from kubecoord.wire.json_text import loads_object

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

    def __init__(self, transport: Transport, namespace: str, *, request_timeout: float) -> None:
        self.namespace = namespace
        self.request_timeout = request_timeout
        self.transport = transport

    def close(self) -> None:
        self.transport.close()

    @property
    def identity(self) -> tuple[str, ...]:
        """Who this client is, where: server, credentials and namespace. Two clients with the
        same identity see the same objects (informers.py shares watches between them)."""
        configuration = self.transport.configuration
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
        endpoint = self.transport.endpoint
        try:
            headers = endpoint.request_headers()
        except ConfigException as exc:  # the in-cluster token refresh hook (transport.py)
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
            answer = self._request("GET", f"/apis/{group}/{version}", None, None, read_timeout, resend=False)
        except TransportError as exc:
            raise BackendUnavailableError(f"cannot discover {what}: {exc}") from None
        if answer.status == 404:
            return False
        if not 200 <= answer.status <= 299:
            raise translate_status(answer.status, _text(answer), "discover", what, None, self.namespace)
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
        path = f"{resource.path}/namespaces/{self.namespace}/{resource.plural}"
        if verb in ("get", "update", "delete"):
            path += "/" + urllib.parse.quote(cast(str, name), safe="")
        write = verb in _WRITES
        if write:
            log.debug("write", extra={"verb": verb, "resource": resource.plural, "object": name})
        # Only reads are sent again when their connection closed before answering: a write's
        # reset cannot be told apart from one after the server applied it (module docstring).
        try:
            answer = self._request(_METHODS[verb], path, body, query, read_timeout, resend=not write)
        except TransportError as exc:
            what = f"{resource.plural} {name!r}" if name else resource.plural
            if write and exc.sent:
                raise OutcomeUnknownError(
                    f"cannot {verb} {what} in namespace {self.namespace!r} after sending it "
                    f"(it may have been applied): {exc}"
                ) from None
            raise BackendUnavailableError(f"cannot {verb} {what} in namespace {self.namespace!r}: {exc}") from None
        what = f"{verb} {resource.plural} in namespace {self.namespace!r}"
        text = _text(answer)
        if not 200 <= answer.status <= 299:
            raise self._failed(answer.status, text, verb, resource, name)
        try:
            return _answer_of(verb, text)
        except ValueError as exc:
            # A write answered 2xx was applied, but its caller cannot go on without the
            # object it wrote: to the caller the outcome is unknown.
            error = OutcomeUnknownError if write else BackendUnavailableError
            raise error(f"cannot {what}: unreadable answer: {exc}") from None

    def _failed(
        self, status: int | None, body: str | None, verb: str, resource: Resource, name: str | None
    ) -> CoordinationError:
        """The error for an HTTP error status; a write answered with a server error (5xx) may
        have been applied (etcd's request timeout answers 500 after a commit it could not
        confirm), so it is an unknown outcome. 429 (API Priority and Fairness) refused it."""
        error = translate_status(status, body, verb, resource.plural, name, self.namespace)
        server_error = not status or status >= 500
        if verb in _WRITES and server_error and type(error) is BackendUnavailableError:
            return OutcomeUnknownError(f"{error} (the write may have been applied)")
        return error

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, query: dict[str, str | None] | None,
        read_timeout: float, *, resend: bool,
    ) -> Answer:
        """One request through the transport; the answer whatever its status."""
        return self.transport.request(
            method, path, body=None if body is None else json.dumps(body).encode(),
            query=[(key, value) for key, value in (query or {}).items() if value],
            timeout=read_timeout, connect_timeout=min(CONNECT_TIMEOUT, read_timeout), resend_if_closed=resend,
        )


def _text(answer: Answer) -> str:
    return answer.data.decode(errors="replace")


def _answer_of(verb: str, text: str) -> dict[str, Any]:
    """A 2xx answer's JSON as ``verb`` answers it: an object whose metadata (if any) is an
    object; for a list, its items too. ValueError for anything else (wire.json_text: not
    JSON, nested too deep to read, a list or scalar), so that no caller meets it."""
    answer = loads_object(text or "{}")
    objects = [answer]
    if verb == "list":
        items = answer.get("items")
        if items is not None and not isinstance(items, list):
            raise ValueError("the list's items are not a list")
        objects += items or []
    for found in objects:
        if not isinstance(found, dict) or not isinstance(found.get("metadata", {}), dict | None):
            raise ValueError("an object of the answer is not an object with object metadata")
    return answer


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
