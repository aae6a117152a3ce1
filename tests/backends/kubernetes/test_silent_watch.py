"""A watch whose connection goes silent (a middlebox that stops forwarding one flow while
new connections work): the observer must notice and resume on a new connection before
its members look expired — not drop live members (issue 9, item 5)."""

from __future__ import annotations

import contextlib
import pathlib
import socket
import threading
import time

import yaml

from kubecoord.api import GroupMembership
from kubecoord_testkit.emulator import ApiEmulator
from kubecoord_testkit.faults import ScriptedServer
from tests.helpers import Recorder

from .conftest import Connect


class FreezingProxy:
    """127.0.0.1 TCP proxy; freeze() stops forwarding on the flows that are streaming now
    (kept open, silent) and resets idle ones; later connections are forwarded."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._lock = threading.Lock()
        self._flows: list[dict[str, object]] = []
        self._server = ScriptedServer(self._forward)
        self.port = self._server.port

    def _forward(self, _server: ScriptedServer, client: socket.socket) -> None:
        server = socket.create_connection(self.upstream)
        flow: dict[str, object] = {"frozen": False, "last_down": 0.0, "sockets": (client, server)}
        with self._lock:
            self._flows.append(flow)
        threading.Thread(target=self._pipe, args=(server, client, flow, True), daemon=True).start()
        self._pipe(client, server, flow, False)

    def _pipe(self, source: socket.socket, target: socket.socket, flow: dict[str, object], down: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if flow["frozen"]:
                    continue  # swallowed: the flow looks alive and says nothing
                if down:
                    flow["last_down"] = time.monotonic()
                target.sendall(data)
        except OSError:
            pass
        finally:
            if not flow["frozen"]:
                _reset(flow)

    def freeze(self) -> int:
        frozen = 0
        now = time.monotonic()
        with self._lock:
            for flow in self._flows:
                if now - float(flow["last_down"]) < 1.5:  # type: ignore[arg-type]
                    flow["frozen"] = True
                    frozen += 1
                else:
                    _reset(flow)
        return frozen

    def close(self) -> None:
        with self._lock:
            for flow in self._flows:
                _reset(flow)
        self._server.close()


def _reset(flow: dict[str, object]) -> None:
    """Close both ends of ``flow`` so that each peer sees it end: shut down first, as a bare
    close() leaves a socket open (no FIN) while another thread is still blocked reading it,
    and a client would then send its next request into a flow nobody forwards."""
    for sock in flow["sockets"]:  # type: ignore[attr-defined]
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()


def through_freezing_proxy(api_emulator: ApiEmulator, tmp_path: pathlib.Path) -> tuple[FreezingProxy, pathlib.Path]:
    """A FreezingProxy in front of the emulator, and a kubeconfig that goes through it."""
    config = yaml.safe_load(api_emulator.write_kubeconfig(tmp_path / "kubeconfig").read_text())
    cluster = config["clusters"][0]["cluster"]
    host, port = cluster["server"].rsplit("//", 1)[1].rsplit(":", 1)
    proxy = FreezingProxy((host, int(port)))
    cluster["server"] = f"http://127.0.0.1:{proxy.port}"
    proxied = tmp_path / "proxied"
    proxied.write_text(yaml.safe_dump(config))
    return proxy, proxied


def observed_member(
    connect: Connect, proxied: pathlib.Path, name: str, timings: dict[str, float]
) -> tuple[GroupMembership, Recorder[set[str]]]:
    """Member "alive" joins group ``name`` directly; an observer, through the proxy, has heard it."""
    connect(**timings).group_membership(name).join("alive", data="1")
    observer = connect(kubeconfig=str(proxied), **timings).group_membership(name)
    seen: Recorder[set[str]] = Recorder()
    observer.add_listener(seen)
    seen.wait_last({"alive"})
    return observer, seen


def test_an_observer_whose_watch_goes_silent_keeps_live_members(
    api_emulator: ApiEmulator, connect: Connect, name: str, tmp_path: pathlib.Path
) -> None:
    timings = {"lease_duration": 8.0, "renew_deadline": 6.0, "retry_period": 0.5}
    proxy, proxied = through_freezing_proxy(api_emulator, tmp_path)
    try:
        observer, seen = observed_member(connect, proxied, name, timings)
        time.sleep(2)  # the watch has a steady rhythm of renewals
        assert proxy.freeze() >= 1
        time.sleep(2 * timings["lease_duration"])  # two lease durations of silence on that flow
        assert observer.membership_list() == {"alive"}
        assert set() not in seen.calls[seen.calls.index({"alive"}):], seen.calls  # never told the member was gone
    finally:
        proxy.close()


def test_a_failed_reap_is_re_read_at_once(
    api_emulator: ApiEmulator, connect: Connect, name: str, tmp_path: pathlib.Path
) -> None:
    """The observer's watch goes silent for longer than a lease but less than its watchdog
    allows (a renewal per second makes its usual gap ~1 s, so ~6 s of silence pass before a
    re-open): it judges the member expired from its stale view and reaps over that version;
    the member renewed meanwhile, so the delete answers 409. The observer must re-read the
    Lease then (a GET), not wait for the watch: the member never drops out of its view."""
    timings = {"lease_duration": 3.0, "renew_deadline": 2.5, "retry_period": 1.0}
    proxy, proxied = through_freezing_proxy(api_emulator, tmp_path)
    try:
        observer, seen = observed_member(connect, proxied, name, timings)
        time.sleep(3)  # the watch has a steady rhythm of renewals
        api_emulator.reset_requests()
        assert proxy.freeze() >= 1
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(
            r.verb == "delete" and r.resource == "leases" and r.status == 409 for r in api_emulator.requests
        ):
            time.sleep(0.1)
        assert any(r.verb == "delete" and r.status == 409 for r in api_emulator.requests), "no reap was tried"
        time.sleep(1.0)
        assert observer.membership_list() == {"alive"}
        assert set() not in seen.calls[seen.calls.index({"alive"}):], seen.calls  # never told the member was gone
    finally:
        proxy.close()
