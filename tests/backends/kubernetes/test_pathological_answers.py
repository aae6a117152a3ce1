"""Answers no API server sends, from a local server (a proxy's, a broken server's): JSON
nested deeper than Python's parser recurses, and a list or scalar where the verb's answer
is an object. Each reaches the backend's caller as a kubecoord error (client.py's table:
a read BackendUnavailableError; a write answered 2xx was applied but cannot be read, so
OutcomeUnknownError; an error status its translation), never RecursionError,
AttributeError or TypeError — on the verbs, on error statuses and on a watch."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest
from kubernetes import client as k8s

from kubecoord.backends.kubernetes.client import LEASES, ApiCallError, KubeClient
from kubecoord.backends.kubernetes.transport import Transport
from kubecoord.errors import BackendUnavailableError, CoordinationError, OutcomeUnknownError, PermissionDeniedError
from kubecoord_testkit.faults import ScriptedServer, StartServer, http_answer

DEEP = 100_000
BODIES = {
    "deep-list": b"[" * DEEP + b"]" * DEEP,
    "deep-object": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    "list": b"[]",
    "number": b"1",
    "string": b'"Lease"',
    "null": b"null",
}
LEASE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x", "resourceVersion": "1"}}
READS: dict[str, Callable[[KubeClient], object]] = {
    "get": lambda client: client.get(LEASES, "x"),
    "list": lambda client: client.list(LEASES),
}
WRITES: dict[str, Callable[[KubeClient], object]] = {
    "create": lambda client: client.create(LEASES, LEASE),
    "replace": lambda client: client.replace(LEASES, "x", LEASE),
    "delete": lambda client: client.delete(LEASES, "x", resource_version="1"),
}


def answering(status: str, body: bytes, content_type: str = "application/json") -> Callable[
        [ScriptedServer, socket.socket], None]:
    """A handler that answers every request ``status`` with ``body``."""

    def handle(server: ScriptedServer, connection: socket.socket) -> None:
        while server.read_request(connection) is not None:
            connection.sendall(http_answer(status, body, content_type=content_type))

    return handle


def raised(server: ScriptedServer, call: Callable[[KubeClient], object]) -> BaseException:
    configuration = k8s.Configuration(host=server.url)
    client = KubeClient(Transport(configuration), "default", request_timeout=10.0)
    try:
        call(client)
    except BaseException as exc:  # what reaches the caller is the question
        return exc
    finally:
        client.close()
    raise AssertionError("the call returned")


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("verb", sorted(READS))
def test_a_read_answered_200_with_no_object_is_unavailable(scripted_server: StartServer, verb: str, body: str) -> None:
    error = raised(scripted_server(answering("200 OK", BODIES[body])), READS[verb])
    assert type(error) is BackendUnavailableError, repr(error)


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("verb", sorted(WRITES))
def test_a_write_answered_200_with_no_object_is_an_unknown_outcome(
    scripted_server: StartServer, verb: str, body: str
) -> None:
    error = raised(scripted_server(answering("200 OK", BODIES[body])), WRITES[verb])
    assert isinstance(error, OutcomeUnknownError), repr(error)


@pytest.mark.parametrize("answer", [
    b'{"kind": "LeaseList", "items": {}}',
    b'{"kind": "LeaseList", "items": [1]}',
    b'{"kind": "LeaseList", "items": [["x"]]}',
    b'{"kind": "LeaseList", "items": [], "metadata": []}',
    b'{"kind": "LeaseList", "items": [{"metadata": "x"}]}',
])
def test_a_list_whose_items_or_metadata_are_no_objects_is_unavailable(
    scripted_server: StartServer, answer: bytes
) -> None:
    error = raised(scripted_server(answering("200 OK", answer)), READS["list"])
    assert type(error) is BackendUnavailableError, repr(error)


def test_an_object_whose_metadata_is_no_object_is_unavailable(scripted_server: StartServer) -> None:
    error = raised(scripted_server(answering("200 OK", b'{"kind": "Lease", "metadata": [1, 2]}')), READS["get"])
    assert type(error) is BackendUnavailableError, repr(error)


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize(("status", "expected"), [
    ("403 Forbidden", PermissionDeniedError), ("409 Conflict", ApiCallError),
    ("500 Internal Server Error", BackendUnavailableError),
])
def test_an_error_status_with_no_status_object_is_translated(
    scripted_server: StartServer, status: str, expected: type[CoordinationError], body: str
) -> None:
    error = raised(scripted_server(answering(status, BODIES[body])), READS["get"])
    assert isinstance(error, expected), repr(error)


@pytest.mark.parametrize("line", [
    BODIES["deep-list"], BODIES["deep-object"], b"[]", b"1",
    b'{"type": "ADDED", "object": []}', b'{"type": "MODIFIED", "object": 1}',
])
def test_a_watch_line_that_is_no_event_breaks_the_watch_as_unavailable(
    scripted_server: StartServer, line: bytes
) -> None:
    def watch(server: ScriptedServer, connection: socket.socket) -> None:
        if server.read_request(connection) is not None:
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
                               + line + b"\n")

    server = scripted_server(watch)
    client = KubeClient(Transport(k8s.Configuration(host=server.url)), "default", request_timeout=10.0)

    async def main() -> list[object]:
        stream = await client.open_watch(LEASES, resource_version="1", timeout_seconds=30)
        try:
            return [event async for event in stream.events()]
        finally:
            stream.close()

    try:
        with pytest.raises(BaseException) as caught:
            asyncio.run(main())
    finally:
        client.close()
    assert type(caught.value) is BackendUnavailableError, repr(caught.value)
