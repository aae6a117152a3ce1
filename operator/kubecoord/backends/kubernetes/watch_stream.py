"""A watch request over asyncio: one HTTP/1.1 GET per watch, its chunked JSON lines read as events.

The multiplexer (watch_mux.py) runs every watch of the process on one event loop, so a
watch cannot be read by the official client (urllib3 blocks a thread per stream). This
module is the small HTTP client it needs, going where and as whom every other request of
the backend goes (endpoint.py: server, TLS, credentials read per watch, the transport's user
agent). An HTTP(S) proxy from the configuration is used through
CONNECT; a SOCKS proxy is not supported (the watch fails with BackendUnavailableError
saying so).

Errors are those of client.py: a status other than 200 is translated by
``translate_status`` (403 -> PermissionDeniedError, 410 -> Gone, ...); an ERROR event
with code 410 raises Gone; a connection that breaks, ends inside a chunk, or stays
silent past the read timeout raises BackendUnavailableError. Everything here runs on the
loop's thread; ``close()`` too (the multiplexer calls it there).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from kubecoord.backends.kubernetes.endpoint import Endpoint
from kubecoord.errors import BackendUnavailableError
from kubecoord.wire.json_text import loads_object

MAX_HEADER_BYTES = 64 * 1024
MAX_ERROR_BODY = 64 * 1024


class HttpWatch:
    """One open watch response. Iterate ``events()``; ``close()`` ends it (on the loop's thread)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, chunked: bool, read_timeout: float,
        what: str,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._chunked = chunked
        self._read_timeout = read_timeout
        self._what = what
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._writer.transport.abort()

    async def lines(self) -> AsyncIterator[bytes]:
        """The stream's non-empty lines; ends when the server ends the response."""
        buffer = b""
        try:
            async for data in self._body():
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield line
            if buffer.strip():
                yield buffer
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            if self.closed:
                return  # closed on purpose (stop, or the silence rule): not a failure to report
            raise BackendUnavailableError(f"watch of {self._what} broke: {type(exc).__name__}: {exc}") from None
        except TimeoutError:
            raise BackendUnavailableError(
                f"watch of {self._what} broke: nothing read for {self._read_timeout:.0f} s"
            ) from None
        finally:
            self.close()

    async def _body(self) -> AsyncIterator[bytes]:
        if not self._chunked:
            while data := await self._read(self._reader.read(65536)):
                yield data
            return
        while True:
            size_line = await self._read(self._reader.readline())
            if not size_line:
                if self.closed:
                    return
                raise ConnectionResetError("the connection ended inside the chunked body")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                return  # the last chunk: the server ended the watch (timeoutSeconds)
            data = await self._read(self._reader.readexactly(size + 2))
            yield data[:-2]

    async def _read(self, read: Any) -> Any:
        return await asyncio.wait_for(read, self._read_timeout)


async def open_watch(
    endpoint: Endpoint, path: str, query: dict[str, str], headers: dict[str, str], *, connect_timeout: float,
    header_timeout: float, read_timeout: float, what: str,
) -> tuple[int, HttpWatch | bytes]:
    """GET ``path?query`` with ``headers`` (endpoint.request_headers()) as a watch:
    (200, the open watch), or (status, the error body)."""
    if endpoint.unsupported:
        raise BackendUnavailableError(endpoint.unsupported)
    target = endpoint.prefix + path + "?" + urllib.parse.urlencode(query)
    try:
        reader, writer = await asyncio.wait_for(_connect(endpoint), connect_timeout)
    except (OSError, ssl.SSLError, ValueError, asyncio.IncompleteReadError) as exc:
        raise BackendUnavailableError(f"cannot watch {what}: {type(exc).__name__}: {exc}") from None
    except TimeoutError:
        raise BackendUnavailableError(f"cannot watch {what}: no connection within {connect_timeout:.0f} s") from None
    try:
        fields = {"Host": _host_header(endpoint), **headers}
        request = f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
        writer.write((request + "Connection: close\r\n\r\n").encode("latin-1"))
        status, answer = await asyncio.wait_for(_read_head(reader), header_timeout)
        chunked = "chunked" in answer.get("transfer-encoding", "").lower()
        watch = HttpWatch(reader, writer, chunked=chunked, read_timeout=read_timeout, what=what)
        if status == 200:
            return status, watch
        body = b"".join([line async for line in _capped(watch.lines())])
        return status, body
    except BaseException as exc:
        writer.transport.abort()
        if isinstance(exc, TimeoutError):
            raise BackendUnavailableError(f"cannot watch {what}: no response within {header_timeout:.0f} s") from None
        if isinstance(exc, (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError)):
            raise BackendUnavailableError(f"cannot watch {what}: {type(exc).__name__}: {exc}") from None
        raise


async def _capped(lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    total = 0
    async for line in lines:
        total += len(line)
        if total > MAX_ERROR_BODY:
            return
        yield line


def _host_header(endpoint: Endpoint) -> str:
    default = 443 if endpoint.tls is not None else 80
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return host if endpoint.port == default else f"{host}:{endpoint.port}"


async def _connect(endpoint: Endpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    limit = MAX_HEADER_BYTES
    if endpoint.proxy is None:
        return await asyncio.open_connection(
            endpoint.host, endpoint.port, ssl=endpoint.tls, server_hostname=endpoint.server_hostname, limit=limit
        )
    # Through an HTTP proxy: CONNECT, then TLS to the API server inside the tunnel.
    reader, writer = await asyncio.open_connection(*endpoint.proxy, limit=limit)
    authority = f"[{endpoint.host}]:{endpoint.port}" if ":" in endpoint.host else f"{endpoint.host}:{endpoint.port}"
    head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in endpoint.proxy_headers.items())
    writer.write((head + "\r\n").encode("latin-1"))
    status, _ = await _read_head(reader)
    if status != 200:
        writer.transport.abort()
        raise ConnectionRefusedError(f"the proxy answered CONNECT with HTTP {status}")
    if endpoint.tls is not None:
        await writer.start_tls(endpoint.tls, server_hostname=endpoint.server_hostname)
    return reader, writer


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP response: {status_line[:80]!r}")
    fields: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return int(parts[1]), fields


def decode_event(line: bytes) -> dict[str, Any]:
    """One watch line as {"type": ..., "object": {...}} (ValueError if it is not one: not
    JSON, nested too deep to read, not an object, or its object not an object)."""
    try:
        event = loads_object(line)
    except ValueError as exc:
        raise ValueError(f"a watch line is not an event ({exc}): {line[:80]!r}") from None
    if not isinstance(event.get("object"), dict):
        raise ValueError(f"a watch event's object is not an object: {line[:80]!r}")
    return event
