"""A scripted TCP server: 127.0.0.1:PORT (or another loopback address) whose every connection
goes to a handler the test writes, on a thread of its own.

Status: used by the test suites for servers that misbehave on purpose (reset after reading a
request, never answer, trickle, answer with a body no real server sends) and for small
proxies; reusable in your own tests. Usage::

    def answer(server: ScriptedServer, connection: socket.socket) -> None:
        while server.read_request(connection) is not None:   # keep-alive: every request
            connection.sendall(http_answer("200 OK", b'{"kind": "Lease"}'))

    with ScriptedServer(answer) as server:
        client = make_client(server.url)                     # http://127.0.0.1:PORT
        ...
    assert server.requests == ["GET /api HTTP/1.1"]

Guarantees: the server listens before the constructor returns; a connection is closed when
its handler returns unless the handler passed it to ``hold()`` (then at ``close()``);
``close()`` stops accepting, sets ``stopping`` (a handler that waits may wait on it), shuts
down every connection still open, so that a handler blocked reading it returns, and joins
the handlers' threads. What a handler raises is the test's: an OSError (the peer went away)
ends that connection quietly, anything else is printed by the thread and ends it.
``connections`` counts the connections accepted; ``heads`` and ``requests`` are what
``read_request`` read, in the order it read them. Not guaranteed: any HTTP beyond reading a
head and a Content-Length body (no chunked requests, no TLS of its own: a handler wraps its
connection itself).
"""

from __future__ import annotations

import contextlib
import dataclasses
import select
import socket
import threading
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

Handler = Callable[["ScriptedServer", socket.socket], None]
"""What a connection is given to: the server (to read requests, hold the connection, wait
for ``stopping``) and the accepted connection (or what the handler wraps it in)."""

_CHUNK = 65536


class StartServer(Protocol):
    """What the ``scripted_server`` fixture gives a test: starts a ScriptedServer."""

    def __call__(self, handler: Handler, *, address: str = "127.0.0.1") -> ScriptedServer: ...


@dataclasses.dataclass(frozen=True)
class Request:
    """One request read from a connection: its head (request line and headers, without the
    blank line) and its body (Content-Length bytes)."""

    head: bytes
    body: bytes

    @property
    def line(self) -> str:
        """The request line, e.g. ``GET /api HTTP/1.1`` (a proxy is sent absolute URLs)."""
        return self.head.split(b"\r\n", 1)[0].decode()


def http_answer(status: str, body: bytes, *, close: bool = False,
                content_type: str = "application/json") -> bytes:
    """An HTTP/1.1 answer with ``status`` ("200 OK") and ``body``; ``close``: with
    ``Connection: close``."""
    headers = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
    if close:
        headers += "Connection: close\r\n"
    return f"{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body


class ScriptedServer:
    """A TCP server on ``address`` (a free port) handing each connection to ``handler``."""

    def __init__(self, handler: Handler, *, address: str = "127.0.0.1") -> None:
        self.address = address
        self.connections = 0
        self.heads: list[bytes] = []
        self.stopping = threading.Event()
        self._handler = handler
        self._listener = socket.create_server((address, 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._held: list[socket.socket] = []
        self._buffers: weakref.WeakKeyDictionary[socket.socket, bytes] = weakref.WeakKeyDictionary()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, name=f"scripted-server-{self.port}", daemon=True)
        self._accepting.start()

    @property
    def url(self) -> str:
        """``http://ADDRESS:PORT``."""
        return f"http://{self.address}:{self.port}"

    @property
    def requests(self) -> list[str]:
        """The request lines ``read_request`` read."""
        return [head.split(b"\r\n", 1)[0].decode() for head in list(self.heads)]

    def read_request(self, connection: socket.socket) -> Request | None:
        """The next request on ``connection`` (recorded in ``heads``), or None when the peer
        closed it before a whole head came. Bytes read past the request are kept for the
        next call on the same connection."""
        buffer = self._buffers.pop(connection, b"")
        while b"\r\n\r\n" not in buffer:
            data = connection.recv(_CHUNK)
            if not data:
                return None
            buffer += data
        head, _, rest = buffer.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:
            data = connection.recv(_CHUNK)
            if not data:
                return None
            rest += data
        if rest[length:]:
            self._buffers[connection] = rest[length:]
        self.heads.append(head)
        return Request(head, rest[:length])

    def hold(self, connection: socket.socket) -> None:
        """Keep ``connection`` open after its handler returns, until ``close()``: a server
        that read a request and never answers."""
        with self._lock:
            self._held.append(connection)

    def idle(self) -> bool:
        """Nothing waits to be accepted and no handler is running."""
        waiting, _, _ = select.select([self._listener], [], [], 0)
        with self._lock:
            running = any(thread.is_alive() for thread in self._threads)
        return not waiting and not running

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            with self._lock:
                self.connections += 1
                self._open.append(connection)
                self._threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket) -> None:
        try:
            with contextlib.suppress(OSError):
                self._handler(self, connection)
        finally:
            with self._lock:
                held = connection in self._held
                if not held:
                    self._open.remove(connection)
            if not held:
                with contextlib.suppress(OSError):
                    connection.close()

    def close(self) -> None:
        """Stop accepting, end every connection still open and join the handlers."""
        self.stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        self._listener.close()
        self._accepting.join(10)
        with self._lock:
            still_open = list(self._open)
        for connection in still_open:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(10)
        with self._lock:
            held, self._held = self._held, []
        for connection in held:
            with contextlib.suppress(OSError):
                connection.close()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
