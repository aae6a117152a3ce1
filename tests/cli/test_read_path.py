"""The one-shot read path against hostile servers and credentials, as whole processes:
a server that accepts and never answers, one that trickles its answer a byte at a time,
one that never finishes a TLS handshake (each: exit 6 within --timeout, one line), 401
for bad credentials (exit 7), exec credential plugins that work and that fail, and an
auth-provider the reader does not support (exit 2, nothing sent)."""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest
import yaml

from kubecoord.cli.kubeapi import load_credentials
from kubecoord_testkit.emulator import ApiEmulator
from kubecoord_testkit.faults import ScriptedServer, StartServer

from .conftest import base_env

Handler = Callable[[socket.socket], None]


@pytest.fixture
def serve(scripted_server: StartServer) -> Callable[[Handler], ScriptedServer]:
    """Starts a ScriptedServer that gives each connection to ``handler``."""
    return lambda handler: scripted_server(lambda _server, conn: handler(conn))


def _kubeconfig(path: pathlib.Path, server: str, user: dict[str, object]) -> pathlib.Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "ns1"}}],
    }))
    return path


def _run(kubeconfig: pathlib.Path, *args: str, timeout: str = "1") -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**base_env(), "KUBECONFIG": str(kubeconfig)}
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "kubecoord.cli", *args, "--timeout", timeout], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    return result, time.monotonic() - started


def test_a_server_that_never_answers_is_exit_6_within_the_timeout(
    serve: Callable[[Handler], ScriptedServer], tmp_path: pathlib.Path
) -> None:
    stop = threading.Event()

    def silent(conn: socket.socket) -> None:
        conn.recv(65536)
        stop.wait(60)

    server = serve(silent)
    try:
        for scheme in ("http", "https"):  # https: the TLS handshake never completes either
            kubeconfig = _kubeconfig(tmp_path / f"{scheme}.yaml", f"{scheme}://127.0.0.1:{server.port}",
                                     {"token": "t"})
            for command in (["leader", "e1"], ["members", "g1"], ["kv", "get", "s1", "k"], ["status"]):
                result, took = _run(kubeconfig, *command)
                assert result.returncode == 6, (command, result.stderr)
                assert "did not answer within 1 s" in result.stderr, result.stderr
                assert result.stderr.count("\n") == 1 and not result.stdout
                assert took < 30  # the timeout, not the 60 s the server would wait (start-up under load aside)
    finally:
        stop.set()


def test_a_server_that_trickles_its_answer_is_cut_at_the_timeout(
    serve: Callable[[Handler], ScriptedServer], tmp_path: pathlib.Path
) -> None:
    """Each byte comes before a per-read timeout would fire; only a deadline on the whole
    request stops it."""
    stop = threading.Event()

    def trickle(conn: socket.socket) -> None:
        conn.recv(65536)
        answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        for byte in answer + b" " * 100000:
            conn.sendall(bytes([byte]))
            if stop.wait(0.05):
                return

    server = serve(trickle)
    kubeconfig = _kubeconfig(tmp_path / "k.yaml", f"http://127.0.0.1:{server.port}", {"token": "t"})
    try:
        result, took = _run(kubeconfig, "leader", "e1", timeout="2")
    finally:
        stop.set()
    assert result.returncode == 6, result.stderr
    assert "did not answer within 2 s" in result.stderr
    assert took < 30


def test_bad_credentials_are_exit_7_in_one_line(serve: Callable[[Handler], ScriptedServer],
                                                 tmp_path: pathlib.Path) -> None:
    """What the API server answers an expired or invalid token: 401 and a Status."""
    status = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized",
                         "reason": "Unauthorized", "code": 401}).encode()

    def unauthorized(conn: socket.socket) -> None:
        while conn.recv(65536):  # keep-alive: answer every request on the connection
            conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(status), status))

    server = serve(unauthorized)
    kubeconfig = _kubeconfig(tmp_path / "k.yaml", f"http://127.0.0.1:{server.port}", {"token": "expired"})
    for command in (["leader", "e1"], ["members", "g1"], ["kv", "ls", "s1"], ["status"]):
        result, _ = _run(kubeconfig, *command, timeout="10")
        assert result.returncode == 7, (command, result.stderr)
        assert "(HTTP 401): Unauthorized" in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert server.connections == 4  # one connection per command: nothing retried


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b"[]"], ids=["nested-too-deep", "list"])
def test_an_answer_that_is_no_json_object_is_exit_6_in_one_line(serve: Callable[[Handler], ScriptedServer],
                                                                tmp_path: pathlib.Path, body: bytes) -> None:
    def answer(conn: socket.socket) -> None:
        while conn.recv(65536):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))

    server = serve(answer)
    kubeconfig = _kubeconfig(tmp_path / "k.yaml", f"http://127.0.0.1:{server.port}", {"token": "t"})
    result, _ = _run(kubeconfig, "leader", "e1", timeout="10")
    assert result.returncode == 6, result.stderr
    assert "no JSON object" in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_an_auth_provider_is_refused_before_anything_is_sent(serve: Callable[[Handler], ScriptedServer],
                                                             tmp_path: pathlib.Path) -> None:
    server = serve(lambda conn: None)
    kubeconfig = _kubeconfig(tmp_path / "k.yaml", f"http://127.0.0.1:{server.port}",
                             {"auth-provider": {"name": "oidc", "config": {}}})
    result, _ = _run(kubeconfig, "leader", "e1", timeout="10")
    assert result.returncode == 2, result.stderr
    assert "auth-provider 'oidc'" in result.stderr and "exec credential plugin" in result.stderr
    assert server.connections == 0


def _plugin(tmp_path: pathlib.Path, body: str) -> dict[str, object]:
    script = tmp_path / "plugin.py"
    script.write_text(body)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(script)], "env": [{"name": "PLUGIN_SAYS", "value": "hello"}],
                     "interactiveMode": "Never"}}


def test_an_exec_credential_plugin_gives_the_token(tmp_path: pathlib.Path) -> None:
    # An emulator of its own, without the CRDs (nothing declares names, so "leader e1" reads
    # "no leader"): the session's emulator has them once another module installed them.
    with ApiEmulator() as emulator:
        _exec_credential_checks(emulator, tmp_path)


def _exec_credential_checks(api_emulator: ApiEmulator, tmp_path: pathlib.Path) -> None:
    plugin = _plugin(tmp_path, f"""
import json, os, sys
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
assert info["kind"] == "ExecCredential" and os.environ["PLUGIN_SAYS"] == "hello"
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": {{"token": {api_emulator.admin_token!r}}}}}))
""")
    kubeconfig = _kubeconfig(tmp_path / "k.yaml", api_emulator.url, plugin)
    result, _ = _run(kubeconfig, "leader", "e1", "-n", "default", "-o", "json", timeout="10")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["leader"] is None

    failing = _kubeconfig(tmp_path / "f.yaml", api_emulator.url,
                          _plugin(tmp_path, "import sys; sys.exit('token expired: log in again')"))
    result, _ = _run(failing, "leader", "e1", "-n", "default", timeout="10")
    assert result.returncode == 7, result.stderr
    assert "exited 1: token expired: log in again" in result.stderr


def test_kubeconfig_paths_are_relative_to_its_folder(tmp_path: pathlib.Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    kubeconfig = folder / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://h:6443/prefix/", "certificate-authority": "ca.crt"}}],
        "users": [{"name": "u", "user": {"tokenFile": "token", "client-certificate": "/abs/tls.crt"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                     {"name": "b", "context": {"cluster": "c", "user": "u", "namespace": "nsb"}}],
    }))
    a = load_credentials(kubeconfig=str(kubeconfig))
    assert (a.server, a.namespace, a.ca_file, a.token_file, a.cert_file) == (
        "https://h:6443/prefix", "default", str(folder / "ca.crt"), str(folder / "token"), "/abs/tls.crt")
    assert load_credentials(kubeconfig=str(kubeconfig), context="b").namespace == "nsb"
    assert load_credentials("mine", kubeconfig=str(kubeconfig), context="b").namespace == "mine"
