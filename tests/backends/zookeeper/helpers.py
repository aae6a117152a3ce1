"""Shared by the zookeeper tests: forced session expiry, reading an event log, and a request
applied but never answered."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

import kubecoord
from kubecoord import Coordinator
from kubecoord_testkit.faults.proxy import ThreadedFaultProxy
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually


def force_expiry(hosts: str, coordinator: Coordinator) -> None:
    """Expire ``coordinator``'s session now: attach a second client to it and close that."""
    client_id = coordinator.client_id  # type: ignore[attr-defined]
    assert client_id is not None
    thief = KazooClient(hosts=hosts, client_id=client_id, timeout=2.0)
    thief.start(timeout=10)
    thief.stop()
    thief.close()


@contextlib.contextmanager
def proxied_and_direct(
    server: ZooKeeperServer, chroot: str
) -> Iterator[tuple[ThreadedFaultProxy, Coordinator, Coordinator]]:
    """(a fault proxy to ``server``, a coordinator reaching it through the proxy with a 1 s
    request timeout, one reaching it directly), both on ``chroot`` with a 10 s session."""
    with ThreadedFaultProxy(("127.0.0.1", server.servers[0].client_port)) as proxy, \
            kubecoord.connect(f"zookeeper://{proxy.address}/{chroot}", lease_duration=10.0,
                              request_timeout=1.0) as proxied, \
            kubecoord.connect(f"zookeeper://{server.hosts}/{chroot}", lease_duration=10.0) as direct:
        yield proxy, proxied, direct


def applied_unanswered(
    proxy: ThreadedFaultProxy, zk: KazooClient, parent: str, call: Callable[[], object]
) -> list[BaseException | None]:
    """Run ``call`` (one create under ``parent``, through ``proxy``) while the proxy holds the
    server's answers; once the create has landed, break the connection and refuse new ones
    (the caller cannot look its node up), wait for ``call`` to end and heal the proxy (the
    client reconnects to the same session). What ``call`` raised, or None."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # the test reports it
            outcome.append(exc)

    zk.ensure_path(parent)  # the create needs no parent made first (each would wait for its answer)
    proxy.hold("down")
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    eventually(lambda: bool(zk.get_children(parent)), 30)  # the create landed
    proxy.refuse()
    proxy.cut()  # its answer is gone; no reconnection while refused
    thread.join(60)
    proxy.heal()
    return outcome


def events(path: Path) -> list[dict[str, Any]]:
    """The event log at ``path``; a last line still being written is left out."""
    if not path.exists():
        return []
    text = path.read_text()
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]



class TcpProxy:
    """A loopback TCP forwarder whose connections a test can cut and refuse.

    Cutting the connection makes kazoo report SUSPENDED at once; while refusing, it
    cannot reconnect; after ``allow()`` it reconnects to the same session. Stopped
    (threads joined) by close().
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._all: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._refusing = False
        self._stopped = False
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)
        self._acceptor.start()

    def cut(self) -> None:
        """Refuse new connections and break the open ones."""
        with self._lock:
            self._refusing = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:  # shutdown only: closing under a pump thread would let its fd be reused
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def allow(self) -> None:
        with self._lock:
            self._refusing = False

    def close(self) -> None:
        self._stopped = True
        self.cut()
        self._acceptor.join(5)
        self._listener.close()
        for thread in self._threads:
            thread.join(5)
        for sock in self._all:
            sock.close()

    def _accept_loop(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                client.close()  # never handed to a pump: safe to close here
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
                self._all += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                pump = threading.Thread(target=self._pump, args=(source, sink), daemon=True)
                pump.start()
                self._threads.append(pump)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
