"""The scripted server (kubecoord_testkit.faults.server): requests read whole, one after
another on a kept-alive connection; a held connection stays open until close(); close()
ends a handler blocked on its connection."""

from __future__ import annotations

import socket

import pytest

from kubecoord_testkit.faults import ScriptedServer, StartServer, http_answer


def _echo_lengths(server: ScriptedServer, connection: socket.socket) -> None:
    while (request := server.read_request(connection)) is not None:
        connection.sendall(http_answer("200 OK", b"%d" % len(request.body)))


def test_pipelined_requests_are_read_one_by_one_with_their_bodies(scripted_server: StartServer) -> None:
    server = scripted_server(_echo_lengths)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
        client.sendall(b"PUT /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\n")
        answers = b""
        while answers.count(b"HTTP/1.1 200 OK") < 2 or not answers.endswith(b"0"):
            answers += client.recv(65536)
    assert server.requests == ["PUT /a HTTP/1.1", "GET /b HTTP/1.1"]
    assert answers.split(b"\r\n\r\n")[1].startswith(b"3")
    assert server.connections == 1


def test_a_held_connection_stays_open_until_close_and_close_ends_a_blocked_handler() -> None:
    def hold(server: ScriptedServer, connection: socket.socket) -> None:
        server.read_request(connection)
        server.hold(connection)

    def blocked(server: ScriptedServer, connection: socket.socket) -> None:
        connection.recv(1)  # until close() shuts the connection down

    with ScriptedServer(hold) as holding, ScriptedServer(blocked) as blocking, \
            socket.create_connection(("127.0.0.1", holding.port), timeout=10) as held, \
            socket.create_connection(("127.0.0.1", blocking.port), timeout=10) as waiting:
        held.sendall(b"GET / HTTP/1.1\r\n\r\n")
        while not (holding.requests and holding.idle()):
            holding.stopping.wait(0.01)
        held.settimeout(0.2)
        with pytest.raises(TimeoutError):  # open, and nothing to read
            held.recv(1)
        holding.close()
        blocking.close()
        held.settimeout(10)
        waiting.settimeout(10)
        assert held.recv(1) == b""
        assert waiting.recv(1) == b""  # its handler, blocked reading, was ended
