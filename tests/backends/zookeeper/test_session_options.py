"""The zookeeper Session's proof of life (alive_until) from the answers kazoo reads."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kazoo.protocol.connection import PING_XID, ConnectionHandler
from kazoo.protocol.serialization import PingInstance, ReplyHeader

from kubecoord.backends.zookeeper import options
from kubecoord.backends.zookeeper.session import Session


def test_an_answer_proves_the_session_alive_from_its_own_ping_not_a_later_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every ping has the same xid. A process resumed from SIGSTOP can have two pings out:
    # kazoo sends a new one when its deadline has passed, before it reads the answer to the
    # one sent before the pause. That answer proves the session alive only from the old
    # ping's send time (a soak found a leader that believed it led past its expired session).
    answers = [ReplyHeader(PING_XID, 0, 0), ReplyHeader(PING_XID, 0, 0)]
    monkeypatch.setattr(ConnectionHandler, "_submit", lambda self, request, timeout, xid=None: None)
    monkeypatch.setattr(ConnectionHandler, "_read_header", lambda self, timeout: (answers.pop(0), b"", 0))
    session = Session("127.0.0.1:1", options.parse({"lease_duration": 4.0}), "test")
    try:
        connection: Any = session.client._connection
        connection._submit(PingInstance, 1.0, PING_XID)
        first_sent = time.monotonic()
        time.sleep(0.5)
        second_sent = time.monotonic()
        connection._submit(PingInstance, 1.0, PING_XID)
        connection._read_header(1.0)  # the answer to the ping sent before the pause
        assert session.alive_until <= first_sent + 4.0 < second_sent + 4.0
        connection._read_header(1.0)
        assert session.alive_until >= second_sent + 4.0
    finally:
        session.close()
