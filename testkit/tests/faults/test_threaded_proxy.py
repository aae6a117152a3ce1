"""The thread-hosted proxy from blocking code, in front of a real ZooKeeper server."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import uuid
from collections.abc import Iterator

import pytest
from tests.helpers import eventually

import kubecoord
from kubecoord_testkit.faults import FaultProxy, ThreadedFaultProxy
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    class Echo(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            with contextlib.suppress(OSError):
                for line in self.rfile:
                    self.wfile.write(b"echo:" + line)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield ("127.0.0.1", server.server_address[1])
    server.shutdown()
    server.server_close()
    thread.join(5)


def receive(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    try:
        return sock.recv(4096)
    except TimeoutError:
        return b"<nothing>"


def test_each_call_has_taken_effect_when_it_returns(echo_server: tuple[str, int]) -> None:
    with ThreadedFaultProxy(echo_server) as proxy, socket.create_connection(("127.0.0.1", proxy.port)) as sock:
        sock.sendall(b"hi\n")
        assert receive(sock, 5) == b"echo:hi\n"
        proxy.hold()
        sock.sendall(b"later\n")
        assert receive(sock, 0.3) == b"<nothing>"
        proxy.release()
        assert receive(sock, 5) == b"echo:later\n"
        assert proxy.cut() == 1
        with contextlib.suppress(ConnectionResetError):
            assert receive(sock, 5) == b""
        stats = proxy.stats()
        assert stats.resets == 1 and stats.open == 0 and stats.connections == 1


def test_zookeeper_session_rides_out_a_hold_and_a_cut(zookeeper_server: ZooKeeperServer) -> None:
    """A real protocol through the proxy: the member survives a short stall and a reset
    (kazoo reconnects within its session), and the proxy saw the traffic."""
    host, port = zookeeper_server.hosts.split(",")[0].split(":")
    with ThreadedFaultProxy((host, int(port))) as proxy:
        url = f"zookeeper://{proxy.address}/proxy-{uuid.uuid4().hex[:8]}"
        with (
            kubecoord.connect(url, lease_duration=6.0) as member,
            kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{url.rsplit('/', 1)[1]}") as observer,
        ):
            member.group_membership("g").join("m1")
            seen = observer.group_membership("g")
            eventually(lambda: seen.membership_list() == {"m1"}, timeout=10)
            proxy.hold()
            threading.Event().wait(1.0)
            proxy.release()
            assert proxy.cut() >= 1
            eventually(lambda: proxy.stats().open >= 1, timeout=15)
            assert seen.membership_list() == {"m1"}
            assert proxy.stats().bytes_up > 0 and proxy.stats().bytes_down > 0


def test_invalid_arguments_fail_before_anything_changes() -> None:
    proxy = FaultProxy(("127.0.0.1", 1))
    with pytest.raises(ValueError, match="direction"):
        proxy._lanes = {}
        proxy.hold("sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 0"):
        proxy.delay(-1)
