"""Where and as whom the floor's requests go (kubecoord.backends.kubernetes.endpoint), as
the transport and the backend's error table see it: credentials the configuration cannot
produce make a request that was never sent (BackendUnavailableError, not an exception of
the loader's)."""

from __future__ import annotations

import datetime
import pathlib
import select
import socket
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s
from kubernetes.config.incluster_config import InClusterConfigLoader

from kubecoord.backends.kubernetes.client import LEASES, KubeClient
from kubecoord.backends.kubernetes.endpoint import Endpoint
from kubecoord.backends.kubernetes.transport import Transport
from kubecoord.errors import BackendUnavailableError, OutcomeUnknownError

BODY = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x", "resourceVersion": "1"}}
CALLS: dict[str, Callable[[KubeClient], object]] = {
    "get": lambda client: client.get(LEASES, "x"),
    "list": lambda client: client.list(LEASES),
    "create": lambda client: client.create(LEASES, BODY),
    "replace": lambda client: client.replace(LEASES, "x", BODY),
    "delete": lambda client: client.delete(LEASES, "x", resource_version="1"),
    "served": lambda client: client.served("coordination.k8s.io", "v1"),
}


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

