"""The kubernetes floor's transport (kubecoord.backends.kubernetes.transport) under the
backend's error-translation table (client.py): a server that resets the connection after
reading a request, one that refuses connections, one that reads and never answers, and
one that answers with an error status. What a caller may rely on: BackendUnavailableError
that is not OutcomeUnknownError means the write was not applied; a write is sent once; a
read is sent a second time only when its connection closed before answering."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Iterator

import pytest
import requests.exceptions
import urllib3.exceptions
from kubernetes import client as k8s

from kubecoord.backends.kubernetes.client import LEASES, KubeClient
from kubecoord.backends.kubernetes.transport import Transport, TransportError
from kubecoord.errors import BackendUnavailableError, OutcomeUnknownError
from kubecoord_testkit.faults import ScriptedServer, StartServer, http_answer
from tests.helpers import eventually

BODY = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x", "resourceVersion": "1"}}
WRITES: dict[str, Callable[[KubeClient], object]] = {
    "create": lambda client: client.create(LEASES, BODY),
    "replace": lambda client: client.replace(LEASES, "x", BODY),
    "delete": lambda client: client.delete(LEASES, "x", resource_version="1"),
}


class Plan:
    """A ScriptedServer's handler that reads each request whole and then does ``what`` with
    its connection: "reset" (RST), "silence" (keeps it open, never answers), or an HTTP
    status line ("500 Internal Server Error") answered with a Status body; given a list,
    the n-th request gets its n-th entry (the last one from then on)."""

    def __init__(self, what: str | list[str]) -> None:
        self._plan = [what] if isinstance(what, str) else list(what)

    def __call__(self, server: ScriptedServer, connection: socket.socket) -> None:
        while server.read_request(connection) is not None:
            what = self._plan[min(len(server.heads), len(self._plan)) - 1]
            if what == "reset":
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                connection.close()
                return
            if what == "silence":
                server.hold(connection)
                return
            body = b'{"kind": "Status", "message": "as the test says", "code": %s}' % what.split()[0].encode()
            if what.startswith("200"):
                body = b'{"kind": "Lease", "metadata": {"name": "x", "resourceVersion": "2"}}'
            connection.sendall(http_answer(what, body))


Serve = Callable[[str | list[str]], ScriptedServer]


@pytest.fixture
def serve(scripted_server: StartServer) -> Serve:
    return lambda what: scripted_server(Plan(what))


def received(server: ScriptedServer, expected: int) -> list[str]:
    """The requests ``server`` received, once at least ``expected`` came and it is idle:
    nothing waits to be accepted and every connection was answered, held or closed (the
    client, closed, sends nothing more)."""
    eventually(lambda: len(server.requests) >= expected and server.idle(), timeout=30)
    return server.requests


def client_of(url: str, request_timeout: float = 5.0) -> KubeClient:
    """A backend client of ``url`` over the transport, with a token."""
    configuration = k8s.Configuration(host=url)
    configuration.api_key = {"BearerToken": "Bearer t"}
    return KubeClient(Transport(configuration), "default", request_timeout=request_timeout)


def raised(url: str, call: Callable[[KubeClient], object], *, request_timeout: float = 5.0) -> Exception:
    """What ``call`` raised on a client of ``url`` (it must raise a kubecoord error)."""
    client = client_of(url, request_timeout)
    try:
        with pytest.raises(BackendUnavailableError) as caught:
            call(client)
    finally:
        client.close()
    return caught.value


def get(client: KubeClient) -> object:
    return client.get(LEASES, "x")


@pytest.fixture
def refusing() -> Iterator[str]:
    """The URL of a port bound and not listening: every connection is refused."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{bound.getsockname()[1]}"


@pytest.mark.parametrize("verb", sorted(WRITES))
def test_a_write_reset_after_it_was_read_is_an_unknown_outcome_sent_once(
    serve: Serve, verb: str
) -> None:
    server = serve("reset")
    error = raised(server.url, WRITES[verb])
    assert isinstance(error, OutcomeUnknownError) and "may have been applied" in str(error)
    assert len(received(server, 1)) == 1


def test_a_read_reset_before_its_answer_is_sent_once_more_and_then_unavailable(
    serve: Serve
) -> None:
    server = serve("reset")
    assert not isinstance(raised(server.url, get), OutcomeUnknownError)
    assert received(server, 2) == ["GET /apis/coordination.k8s.io/v1/namespaces/default/leases/x HTTP/1.1"] * 2


def test_a_read_whose_connection_closed_before_answering_is_answered_on_the_second(
    serve: Serve
) -> None:
    server = serve(["reset", "200 OK"])
    client = client_of(server.url)
    try:
        assert get(client) == {"kind": "Lease", "metadata": {"name": "x", "resourceVersion": "2"}}
    finally:
        client.close()
    assert len(received(server, 2)) == 2


@pytest.mark.parametrize("verb", sorted(WRITES))
def test_a_write_to_a_refusing_server_was_not_sent(refusing: str, verb: str) -> None:
    assert not isinstance(raised(refusing, WRITES[verb]), OutcomeUnknownError)


def test_a_read_of_a_refusing_server_is_unavailable(refusing: str) -> None:
    raised(refusing, lambda client: client.list(LEASES))
    raised(refusing, lambda client: client.served("coordination.k8s.io", "v1"))


@pytest.mark.parametrize("verb", sorted(WRITES))
def test_a_write_unanswered_within_the_read_timeout_is_an_unknown_outcome_sent_once(
    serve: Serve, verb: str
) -> None:
    server = serve("silence")
    assert isinstance(raised(server.url, WRITES[verb], request_timeout=0.3), OutcomeUnknownError)
    assert len(received(server, 1)) == 1


def test_a_read_unanswered_within_the_read_timeout_is_unavailable_and_sent_once(
    serve: Serve
) -> None:
    server = serve("silence")
    assert not isinstance(raised(server.url, get, request_timeout=0.3), OutcomeUnknownError)
    assert len(received(server, 1)) == 1


@pytest.mark.parametrize(("status", "unknown"), [("500 Internal Server Error", True), ("504 Gateway Timeout", True),
                                                 ("429 Too Many Requests", False)])
def test_a_write_answered_with_a_server_error_is_unknown_and_with_429_refused(
    serve: Serve, status: str, unknown: bool
) -> None:
    server = serve(status)
    assert isinstance(raised(server.url, WRITES["replace"]), OutcomeUnknownError) is unknown
    assert not isinstance(raised(server.url, get), OutcomeUnknownError)
    assert len(received(server, 2)) == 2  # no transport retry of either, whatever Retry-After says


def test_a_connect_timeout_is_a_request_not_sent() -> None:
    """requests reports urllib3's connect timeout wrapped twice (ConnectTimeout around
    MaxRetryError around ConnectTimeoutError): the transport finds it under the wrapping."""
    timeout = urllib3.exceptions.ConnectTimeoutError(None, "connect timed out")
    wrapped = requests.exceptions.ConnectTimeout(urllib3.exceptions.MaxRetryError(None, "/", timeout))  # type: ignore[arg-type]
    configuration = k8s.Configuration(host="http://127.0.0.1:1")
    transport = Transport(configuration)

    def raising(*_: object, **__: object) -> None:
        raise wrapped

    transport.session.get_adapter("http://").send = raising  # type: ignore[method-assign]
    try:
        with pytest.raises(TransportError) as caught:
            transport.request("PUT", "/api/v1/namespaces", body=b"{}", timeout=1.0)
        assert caught.value.sent is False
        client = KubeClient(transport, "default", request_timeout=1.0)
        with pytest.raises(BackendUnavailableError) as translated:
            client.replace(LEASES, "x", BODY)
        assert not isinstance(translated.value, OutcomeUnknownError)
    finally:
        transport.close()


def test_every_request_carries_the_configurations_credentials_at_that_moment(serve: Serve) -> None:
    """The token is read per request (a rotated in-cluster token is used at once)."""
    server = serve("200 OK")
    tokens = iter(["Bearer first", "Bearer second"])
    configuration = k8s.Configuration(host=server.url)
    configuration.api_key = {"BearerToken": "Bearer expired"}
    configuration.refresh_api_key_hook = lambda c: c.api_key.update(BearerToken=next(tokens))
    client = KubeClient(Transport(configuration), "default", request_timeout=5.0)
    try:
        for _ in range(2):
            client.get(LEASES, "x")
    finally:
        client.close()
    sent = [line.lower() for head in server.heads for line in head.split(b"\r\n")
            if line.lower().startswith(b"authorization:")]
    assert sent == [b"authorization: bearer first", b"authorization: bearer second"]


# -- the asynchronous face: the same account of what reached the server ------------------------
def arequest(url: str, method: str, *, timeout: float = 5.0, resend_if_closed: bool = False) -> TransportError:
    """The TransportError of one request on the asynchronous face (it must raise one)."""
    transport = Transport(k8s.Configuration(host=url))

    async def main() -> None:
        try:
            await transport.arequest(method, "/api/v1/namespaces/default/configmaps/x",
                                     body=None if method == "GET" else b"{}", timeout=timeout,
                                     resend_if_closed=resend_if_closed)
        finally:
            await transport.aclose()

    try:
        with pytest.raises(TransportError) as caught:
            asyncio.run(main())
    finally:
        transport.close()
    return caught.value


@pytest.mark.parametrize("method", ["PUT", "DELETE", "POST", "PATCH"])
def test_an_async_write_reset_after_it_was_read_was_sent_once(serve: Serve, method: str) -> None:
    server = serve("reset")
    assert arequest(server.url, method).sent is True
    assert len(received(server, 1)) == 1


def test_an_async_read_reset_before_its_answer_is_sent_once_more(serve: Serve) -> None:
    server = serve("reset")
    assert arequest(server.url, "GET", resend_if_closed=True).sent is True
    assert len(received(server, 2)) == 2


def test_an_async_request_to_a_refusing_server_was_not_sent(refusing: str) -> None:
    assert arequest(refusing, "PUT").sent is False


def test_an_async_write_unanswered_within_its_timeout_may_have_been_applied(serve: Serve) -> None:
    server = serve("silence")
    assert arequest(server.url, "PUT", timeout=0.3).sent is True
    assert len(received(server, 1)) == 1
