"""TLS through an HTTP(S) proxy's CONNECT tunnel as without one: the configuration's
``tls_server_name`` (a kubeconfig's tls-server-name) is the name the API server's
certificate is checked against and the SNI sent, and ``assert_hostname = False`` skips
the name check, whether or not the request goes through a proxy (the official client's
REST layer gave its proxy manager the same TLS settings as its direct one). The CA that
checks the server is the configuration's on both of the transport's faces, whatever
pykube-ng's PYKUBE_SSL_CERTIFICATE_AUTHORITY says."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import socket
import ssl
import threading

import pytest
from kubernetes import client as k8s

from kubecoord.backends.kubernetes.client import LEASES, KubeClient
from kubecoord.backends.kubernetes.transport import Transport, TransportError
from kubecoord_testkit.faults import ScriptedServer, StartServer, http_answer
from kubecoord_testkit.servers import pki

LEASE = {"kind": "Lease", "metadata": {"name": "x", "resourceVersion": "2"}}


class TlsServer:
    """HTTPS on 127.0.0.2 with a certificate for 127.0.0.1 and localhost only: a client
    that checks it against the address it dialled fails; one that checks "localhost" (its
    TLS server name) is answered 200 with a Lease."""

    def __init__(self, folder: pathlib.Path, start: StartServer) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(folder / "server.crt", folder / "server.key")
        self.server_names: list[str | None] = []
        self.context.sni_callback = lambda _socket, name, _context: self.server_names.append(name)  # type: ignore[func-returns-value]
        self.port = start(self.handle, address="127.0.0.2").port

    def handle(self, server: ScriptedServer, connection: socket.socket) -> None:
        with contextlib.suppress(OSError), self.context.wrap_socket(connection, server_side=True) as tls:
            if server.read_request(tls) is not None:
                body = b'{"kind": "Lease", "metadata": {"name": "x", "resourceVersion": "2"}}'
                tls.sendall(http_answer("200 OK", body, close=True))


class ConnectProxy:
    """An HTTP proxy on 127.0.0.1 that tunnels CONNECT to the address asked and records
    what was asked."""

    def __init__(self, start: StartServer) -> None:
        self.seen: list[str] = []
        self.port = start(self.handle).port

    def handle(self, server: ScriptedServer, connection: socket.socket) -> None:
        request = server.read_request(connection)
        if request is None or not request.line.startswith("CONNECT "):
            return
        target = request.line.split(" ", 2)[1]
        self.seen.append(target)
        host, _, port = target.rpartition(":")
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=10) as upstream:
            connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            pipe = threading.Thread(target=_pipe, args=(upstream, connection), daemon=True)
            pipe.start()
            _pipe(connection, upstream)
            pipe.join(timeout=10)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("pki")
    pki.make_ca(folder)
    pki.issue(folder, "server", "/CN=kube-apiserver", "server")
    return folder


@pytest.fixture
def server(certificates: pathlib.Path, scripted_server: StartServer) -> TlsServer:
    return TlsServer(certificates, scripted_server)


@pytest.fixture
def proxy(scripted_server: StartServer) -> ConnectProxy:
    return ConnectProxy(scripted_server)


@pytest.mark.parametrize("proxied", [False, True], ids=["direct", "proxied"])
@pytest.mark.parametrize("setting", ["tls_server_name", "assert_hostname"])
def test_the_tls_server_name_and_hostname_check_hold_through_a_proxy_too(
    certificates: pathlib.Path, server: TlsServer, proxy: ConnectProxy, proxied: bool, setting: str
) -> None:
    """The server is dialled at 127.0.0.2, which its certificate does not name: it is checked
    against ``tls_server_name`` ("localhost", sent as SNI), or not by name at all with
    ``assert_hostname = False`` (the certificate's chain still is)."""
    configuration = k8s.Configuration(host=f"https://127.0.0.2:{server.port}")
    configuration.ssl_ca_cert = str(certificates / "ca.crt")
    if setting == "tls_server_name":
        configuration.tls_server_name = "localhost"
    else:
        configuration.assert_hostname = False
    configuration.api_key = {"BearerToken": "Bearer t"}
    configuration.proxy = f"http://127.0.0.1:{proxy.port}" if proxied else None
    client = KubeClient(Transport(configuration), "default", request_timeout=10.0)
    try:
        assert client.get(LEASES, "x") == LEASE
    finally:
        client.close()
    assert server.server_names == (["localhost"] if setting == "tls_server_name" else [None])
    assert proxy.seen == ([f"127.0.0.2:{server.port}"] if proxied else [])


def _both_faces(configuration: k8s.Configuration) -> list[int | str]:
    """What a GET on each face of one transport ends in: the status, or "TransportError"."""
    transport = Transport(configuration)
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/x"
    outcomes: list[int | str] = []
    try:
        try:
            outcomes.append(transport.request("GET", path, timeout=10.0).status)
        except TransportError:
            outcomes.append("TransportError")

        async def on_loop() -> None:
            try:
                outcomes.append((await transport.arequest("GET", path, timeout=10.0)).status)
            except TransportError:
                outcomes.append("TransportError")
            finally:
                await transport.aclose()

        asyncio.run(on_loop())
    finally:
        transport.close()
    return outcomes


@pytest.mark.parametrize("configured", [True, False], ids=["configured-ca", "no-configured-ca"])
def test_the_ca_is_the_configurations_on_both_faces_whatever_pykubes_variable_says(
    certificates: pathlib.Path, server: TlsServer, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
    configured: bool,
) -> None:
    """$PYKUBE_SSL_CERTIFICATE_AUTHORITY names a CA the one credential rule does not read
    (config.py): with the configuration's CA the server is trusted on both faces though the
    variable names another CA; without one, neither face trusts the server though the
    variable names its CA (the system's store does not hold the test CA)."""
    other = tmp_path / "other"
    other.mkdir()
    pki.make_ca(other, "another-ca")
    monkeypatch.setenv("PYKUBE_SSL_CERTIFICATE_AUTHORITY", str((other if configured else certificates) / "ca.crt"))
    configuration = k8s.Configuration(host=f"https://127.0.0.2:{server.port}")
    configuration.tls_server_name = "localhost"
    if configured:
        configuration.ssl_ca_cert = str(certificates / "ca.crt")
    assert _both_faces(configuration) == ([200, 200] if configured else ["TransportError", "TransportError"])
