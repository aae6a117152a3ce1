"""HTTP/1.1 GETs on one keep-alive socket, each bounded by a deadline in total.

Why not http.client: importing it (and the email package it parses headers with) costs
as much as the rest of a state command's start-up, and its timeouts bound each wait for
data, not a request: a server that trickles one byte a second holds it forever. This
reads exactly what the Kubernetes API server sends a GET — a status line, headers, a
body with Content-Length, chunked, or until close; no compression is asked for — and
checks the deadline before every wait.

Not supported (not needed against an API server): 1xx interim answers other than
100 Continue, trailers (read and dropped), proxies.
"""

from __future__ import annotations

import socket
import ssl
import time

MAX_HEAD = 64 * 1024
"""Bytes of status line and headers accepted (the API server sends well under 1 KiB)."""
_CHUNK = 64 * 1024


class ProtocolError(OSError):
    """The server's answer is not HTTP/1.x as this module reads it."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        return left


class Connection:
    """One socket (TLS when ``context`` is given) to ``host``:``port``; GETs in sequence."""

    def __init__(self, host: str, port: int, *, context: ssl.SSLContext | None, server_name: str | None,
                 deadline: Deadline) -> None:
        self.host_header = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        sock = socket.create_connection((host, port), timeout=deadline.left())
        try:
            if context is not None:
                sock.settimeout(deadline.left())  # the handshake, too, within the deadline
                sock = context.wrap_socket(sock, server_hostname=server_name or host)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._buffer = b""
        self.open = True

    def close(self) -> None:
        self.open = False
        self._sock.close()

    def get(self, target: str, headers: dict[str, str], deadline: Deadline) -> tuple[int, bytes]:
        """(status, body) of ``GET target``; the connection stays open if the server allows."""
        lines = [f"GET {target} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self._sock.settimeout(deadline.left())
        self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        while True:
            status, fields = self._head(deadline)
            if status != 100:
                break
        if fields.get("transfer-encoding", "").lower() == "chunked":
            body = self._chunked(deadline)
        elif "content-length" in fields:
            body = self._exactly(int(fields["content-length"]), deadline)
        else:
            body = self._until_close(deadline)
        if fields.get("connection", "").lower() == "close":
            self.close()
        return status, body

    # -- reading ---------------------------------------------------------------------------
    def _fill(self, deadline: Deadline) -> bool:
        """More bytes into the buffer; False at the end of the stream."""
        self._sock.settimeout(deadline.left())
        data = self._sock.recv(_CHUNK)
        if not data:
            return False
        self._buffer += data
        return True

    def _line(self, deadline: Deadline) -> bytes:
        while b"\r\n" not in self._buffer:
            if len(self._buffer) > MAX_HEAD:
                raise ProtocolError("a line of the answer is longer than 64 KiB")
            if not self._fill(deadline):
                raise ConnectionResetError("the server closed the connection mid-answer")
        line, self._buffer = self._buffer.split(b"\r\n", 1)
        return line

    def _head(self, deadline: Deadline) -> tuple[int, dict[str, str]]:
        status_line = self._line(deadline).decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        fields: dict[str, str] = {}
        size = len(status_line)
        while line := self._line(deadline):
            size += len(line)
            if size > MAX_HEAD:
                raise ProtocolError("the answer's headers are longer than 64 KiB")
            name, _, value = line.decode("latin-1").partition(":")
            fields[name.strip().lower()] = value.strip()
        return int(parts[1]), fields

    def _exactly(self, size: int, deadline: Deadline) -> bytes:
        while len(self._buffer) < size:
            if not self._fill(deadline):
                raise ConnectionResetError("the server closed the connection mid-body")
        body, self._buffer = self._buffer[:size], self._buffer[size:]
        return body

    def _chunked(self, deadline: Deadline) -> bytes:
        parts: list[bytes] = []
        while True:
            size_text = self._line(deadline).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}") from None
            if size == 0:
                while self._line(deadline):  # trailers, then the empty line
                    pass
                return b"".join(parts)
            parts.append(self._exactly(size, deadline))
            if self._line(deadline):
                raise ProtocolError("a chunk does not end with CRLF")

    def _until_close(self, deadline: Deadline) -> bytes:
        while self._fill(deadline):
            pass
        body, self._buffer = self._buffer, b""
        self.open = False
        return body
