"""Where and as whom the floor's requests go (kubecoord.backends.kubernetes.endpoint), as
the transport and the backend's error table see it: credentials the configuration cannot
produce make a request that was never sent (BackendUnavailableError, not an exception of
the loader's), and a proxy is bypassed by the same ``no_proxy`` rules the official
client applies (addresses in a CIDR block, host:port entries)."""

from __future__ import annotations

import asyncio
import datetime
import pathlib
import select
import socket
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s
from kubernetes.config.incluster_config import InClusterConfigLoader

from kubecoord.backends.kubernetes import load_config
from kubecoord.backends.kubernetes.client import LEASES, KubeClient
from kubecoord.backends.kubernetes.endpoint import Endpoint, bypass_proxy
from kubecoord.backends.kubernetes.transport import Transport, TransportError
from kubecoord.errors import BackendUnavailableError, OutcomeUnknownError
from kubecoord_testkit.faults import ScriptedServer, StartServer, http_answer

BODY = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x", "resourceVersion": "1"}}
CALLS: dict[str, Callable[[KubeClient], object]] = {
    "get": lambda client: client.get(LEASES, "x"),
    "list": lambda client: client.list(LEASES),
    "create": lambda client: client.create(LEASES, BODY),
    "replace": lambda client: client.replace(LEASES, "x", BODY),
    "delete": lambda client: client.delete(LEASES, "x", resource_version="1"),
    "served": lambda client: client.served("coordination.k8s.io", "v1"),
}


LEASE = b'{"kind": "Lease", "metadata": {"name": "x", "resourceVersion": "2"}}'


def answering(server: ScriptedServer, connection: socket.socket) -> None:
    """Answers the request 200 with a Lease and closes (``server.requests``: each request
    line; a proxy sees absolute URLs in them)."""
    if server.read_request(connection) is not None:
        connection.sendall(http_answer("200 OK", LEASE, close=True))


@pytest.fixture
def listening() -> Iterator[tuple[str, socket.socket]]:
    """A port that listens and never accepts: a connection made to it stays pending."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", listener


def in_cluster(service_account: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> k8s.Configuration:
    """A configuration as the in-cluster loader makes it, its token re-read on every request
    (the loader's refresh period, a minute in a pod, made zero)."""
    (service_account / "token").write_text("first")
    (service_account / "ca.crt").write_text("not read for a plain-HTTP server")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(service_account / "token"), cert_filename=str(service_account / "ca.crt")
    )
    loader._token_refresh_period = datetime.timedelta(0)
    configuration = k8s.Configuration()
    loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    return configuration


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_token_file_gone_when_the_loader_re_reads_it_is_a_request_not_sent(
    call: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, listening: tuple[str, socket.socket]
) -> None:
    """The in-cluster loader's refresh hook opens the token file without checking it is
    there: FileNotFoundError (an OSError, not its ConfigException) from inside the request."""
    url, listener = listening
    configuration = in_cluster(tmp_path, monkeypatch)
    configuration.host = url
    client = KubeClient(Transport(configuration), "default", request_timeout=2.0)
    (tmp_path / "token").unlink()
    try:
        with pytest.raises(BackendUnavailableError, match="credentials unavailable") as caught:
            CALLS[call](client)
    finally:
        client.close()
    assert not isinstance(caught.value, OutcomeUnknownError)
    assert select.select([listener], [], [], 0)[0] == []  # no connection was made


@pytest.mark.parametrize("failure", [PermissionError(13, "Permission denied"),
                                     UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
                                     KeyError("id-token")])
def test_whatever_a_refresh_hook_raises_the_endpoint_reports_as_credentials_unavailable(failure: Exception) -> None:
    """The hook is the loader's (in-cluster token, exec plugins, OIDC and GCP refreshes):
    the transport, the watches and the operator's requests each expect ConfigException."""
    from kubernetes.config.config_exception import ConfigException

    def hook(_: k8s.Configuration) -> None:
        raise failure

    configuration = k8s.Configuration(host="http://127.0.0.1:1")
    configuration.api_key = {"BearerToken": "Bearer t"}
    configuration.refresh_api_key_hook = hook
    endpoint = Endpoint.from_configuration(configuration, user_agent="test")
    with pytest.raises(ConfigException, match=type(failure).__name__):
        endpoint.request_headers()


@pytest.mark.parametrize(("no_proxy", "bypassed"), [
    ("127.0.0.0/8", True), ("10.0.0.0/8,127.0.0.1/32", True), ("127.0.0.1:{port}", True), ("127.0.0.1", True),
    ("*", True), ("10.0.0.0/8", False), ("127.0.0.1:1", False), ("", False),
])
def test_the_proxy_from_the_environment_is_bypassed_by_the_official_clients_no_proxy_rules(
    scripted_server: StartServer, monkeypatch: pytest.MonkeyPatch, no_proxy: str, bypassed: bool
) -> None:
    """HTTP_PROXY and NO_PROXY as a pod's environment has them (the official Configuration
    reads both; a cluster-wide proxy's NO_PROXY names the service network as a CIDR block):
    requests, watches and the official client's own requests go the same way."""
    server, proxy = scripted_server(answering), scripted_server(answering)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", no_proxy.format(port=server.port))
    configuration = k8s.Configuration(host=server.url)
    assert configuration.proxy == proxy.url
    client = KubeClient(Transport(configuration), "default", request_timeout=5.0)
    try:
        client.get(LEASES, "x")
    finally:
        client.close()
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/x"
    assert (server.requests, proxy.requests) == (
        ([f"GET {path} HTTP/1.1"], []) if bypassed else ([], [f"GET {server.url}{path} HTTP/1.1"])
    )
    assert (Endpoint.from_configuration(configuration, user_agent="test").proxy is None) is bypassed
    assert bypass_proxy(server.url, configuration.no_proxy or "") is bypassed


def test_no_proxy_is_read_as_the_official_client_reads_it() -> None:
    """The installed client's own rule (kubernetes.client.rest), where it has one: the
    same answer for API servers by name, address and port against the usual entries."""
    from kubernetes.client import rest

    official = getattr(rest, "should_bypass_proxies", None)
    if official is None:
        pytest.skip("this kubernetes client has no should_bypass_proxies")
    urls = ["https://10.96.0.1:443", "https://10.96.0.1", "http://127.0.0.1:8080", "https://api.example.com:6443",
            "https://[::1]:6443", "https://[fd00::1]", "https://KUBE.Example.COM", "https://localhost"]
    entries = ["", "*", "10.96.0.0/12", "10.0.0.0/8,.svc", "127.0.0.1", "127.0.0.1:8080", "127.0.0.1:9",
               ".example.com", "example.com", "api.example.com:6443", "::1", "[::1]:6443", "fd00::/8",
               "kube.example.com", " localhost ", "bogus/99", "10.96.0.1/33", ".com"]
    assert [(u, e) for u in urls for e in entries if bypass_proxy(u, e) != official(u, e)] == []


def kubeconfig_with_token_file(folder: pathlib.Path, server: str, token: str) -> k8s.Configuration:
    """The one credential rule's configuration of a kubeconfig whose user has a tokenFile."""
    (folder / "token").write_text(token)
    (folder / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {{tokenFile: '{folder / 'token'}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return load_config(kubeconfig=str(folder / "kubeconfig")).configuration


def test_a_token_file_ending_in_a_newline_is_sent_without_it(
    scripted_server: StartServer, tmp_path: pathlib.Path
) -> None:
    """``echo TOKEN > file`` writes one; the official loader keeps it in the header value,
    kubectl (client-go) trims the file's whitespace, and HTTP drops a value's surrounding
    whitespace anyway. Both faces of the transport send the token."""
    server = scripted_server(answering)
    transport = Transport(kubeconfig_with_token_file(tmp_path, server.url, "abc\n"))
    client = KubeClient(transport, "default", request_timeout=5.0)

    async def on_a_loop() -> int:
        try:
            return (await transport.arequest("GET", "/api", timeout=5.0)).status
        finally:
            await transport.aclose()

    try:
        client.get(LEASES, "x")
        assert asyncio.run(on_a_loop()) == 200
    finally:
        client.close()
    sent = [line for head in server.heads for line in head.split(b"\r\n") if line.lower().startswith(b"authorization")]
    assert sent == [b"authorization: Bearer abc"] * 2


def test_a_token_with_a_line_break_inside_is_a_request_not_sent_on_either_face(
    tmp_path: pathlib.Path, listening: tuple[str, socket.socket]
) -> None:
    """It would end the header (the watches write their heads themselves); aiohttp refuses
    it with a ValueError of its own, requests with InvalidHeader."""
    url, listener = listening
    transport = Transport(kubeconfig_with_token_file(tmp_path, url, "abc\nX-Injected: 1"))
    client = KubeClient(transport, "default", request_timeout=2.0)

    async def on_a_loop() -> TransportError:
        try:
            with pytest.raises(TransportError, match="credentials unavailable") as caught:
                await transport.arequest("PUT", "/api/v1/namespaces/default/configmaps/x", body=b"{}", timeout=2.0)
            return caught.value
        finally:
            await transport.aclose()

    try:
        with pytest.raises(BackendUnavailableError, match="credentials unavailable") as translated:
            client.replace(LEASES, "x", BODY)
        assert not isinstance(translated.value, OutcomeUnknownError)
        assert asyncio.run(on_a_loop()).sent is False
    finally:
        client.close()
    assert select.select([listener], [], [], 0)[0] == []


@pytest.mark.parametrize("field", ["certificate-authority-data", "client-certificate-data"])
def test_tls_data_that_is_no_certificate_is_a_bad_configuration_at_connect(tmp_path: pathlib.Path, field: str) -> None:
    """The transport reads the TLS files when it is built, in connect(): what Python's ssl
    or pykube raise about them is InvalidArgumentError there, as for any bad kubeconfig."""
    import base64

    import kubecoord
    from kubecoord.errors import InvalidArgumentError

    junk = base64.b64encode(b"not a certificate").decode()
    user = f"{{{field}: {junk}, client-key-data: {junk}}}" if field.startswith("client") else "{token: abc}"
    cluster = f"{{server: 'https://127.0.0.1:1', {field}: {junk}}}" if field.startswith("certificate") else (
        "{server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}")
    (tmp_path / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {cluster}}}]\nusers: [{{name: u, user: {user}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    with pytest.raises(InvalidArgumentError, match="TLS"):
        kubecoord.connect("kubernetes://default", kubeconfig=str(tmp_path / "kubeconfig"))
