"""A TCP fault proxy: 127.0.0.1:PORT forwarding to one upstream server, with faults on demand.

Status: used by the test suites and by ``kubecoord-testkit soak``; reusable in your own tests. Usage from asyncio::

    proxy = FaultProxy(("127.0.0.1", 2181))
    await proxy.start()                  # proxy.port is the port clients connect to
    proxy.delay(0.3)                     # every chunk arrives 0.3 s late, both ways
    proxy.hold("down")                   # server -> client bytes wait ...
    proxy.release()                      # ... and are delivered, in order
    proxy.cut()                          # reset every open connection
    await proxy.aclose()

and from threads (the proxy runs its own event loop in a daemon thread; each call has
taken effect when it returns)::

    with ThreadedFaultProxy(("127.0.0.1", 2181)) as proxy:
        coord = kubecoord.connect(f"zookeeper://127.0.0.1:{proxy.port}")
        proxy.drop()
        ...
        proxy.heal()

Faults, and what a client behind the proxy sees:

- ``delay(seconds, direction)``: latency. Each chunk is forwarded ``seconds`` after it
  arrived; order and throughput are kept.
- ``hold(direction)``: a stall that heals, as a partition shorter than TCP's retransmission
  timeout looks. Bytes are buffered (bounded: reading stops when the buffer is full) and
  delivered in order at ``release()``; connections stay open.
  ``hold("down", after=N)`` starts the hold as the client's N-th chunk from now reaches
  the proxy, before it is forwarded: the server gets that request, its answer waits. With
  ``cut()`` next, a write the server applied loses its answer (an unknown outcome) even
  when the client reads before it writes (``after=2``: the read is answered, the write's
  answer is held). Chunks are counted on any connection, and a client's heartbeats count.
- ``drop(direction)``: a blackhole, as a firewall DROP looks. Bytes vanish and nobody is
  told; new connections are accepted but carry nothing. TCP never loses bytes inside a
  connection it keeps, so a connection that lost bytes stays dark and ``heal()`` resets
  it (what the kernel would do once its retransmissions gave up), never forwarding a
  stream with a hole in it.
- ``refuse()``: new connections are reset at once (a server that is down).
- ``cut()``: every open connection is reset (RST, buffered bytes discarded).
- ``cut_after(N, direction)``: the connection that forwards the N-th chunk from now in
  ``direction`` is reset 0.1 s after forwarding it (the peer has read it): an answer
  larger than one chunk (64 KiB) arrives cut half-way, its headers and part of its body read.
- ``heal()``: back to a transparent pipe (no delay, hold, drop or refusal).

Directions: ``"up"`` is client -> server, ``"down"`` server -> client, ``"both"`` both.

Guarantees: listens on 127.0.0.1 only; faults apply to the chunks read after the call
(and, for hold, also to chunks already queued but not yet written); ``set_upstream``
redirects new connections (a server restarted on another port). Not guaranteed: faults
at packet granularity (the proxy sees a byte stream: a chunk is whatever one read returned).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import struct
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

log = logging.getLogger(__name__)

Direction = Literal["up", "down", "both"]
_DIRECTIONS: tuple[Literal["up", "down"], ...] = ("up", "down")
_CHUNK = 65536
_QUEUE_CHUNKS = 256
"""Chunks buffered per direction and connection before reading stops (backpressure)."""
_EOF = b""
CUT_AFTER_GRACE = 0.1
"""Seconds between forwarding the chunk ``cut_after`` counted and resetting its connection."""
T = TypeVar("T")


@dataclasses.dataclass
class ProxyStats:
    """Counters since start (a snapshot: ``stats()`` returns a copy)."""

    connections: int = 0
    """Client connections accepted (refused ones included)."""
    open: int = 0
    refused: int = 0
    resets: int = 0
    """Connections reset by cut(), by heal() after a drop, or by refuse()."""
    upstream_failures: int = 0
    """Accepted connections whose upstream could not be reached."""
    bytes_up: int = 0
    bytes_down: int = 0
    dropped_up: int = 0
    dropped_down: int = 0


@dataclasses.dataclass
class _Lane:
    """The fault state of one direction."""

    delay: float = 0.0
    drop: bool = False
    hold_other_after: int = 0
    """Chunks of this direction still to arrive before the other direction is held (0: none)."""
    cut_after: int = 0
    """Chunks of this direction still to forward before their connection is reset (0: none)."""
    flowing: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    """Set unless held."""

    def __post_init__(self) -> None:
        self.flowing.set()


class _Connection:
    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.writers = {"up": server, "down": client}
        self.dark = False
        """Lost bytes in some direction: forwards nothing more; reset at heal()."""
        self.tasks: list[asyncio.Task[None]] = []

    def reset(self) -> None:
        for writer in self.writers.values():
            _reset(writer)
        for task in self.tasks:
            task.cancel()


def _reset(writer: asyncio.StreamWriter) -> None:
    # SO_LINGER 0 turns close into an RST: the peer sees "connection reset", as from a
    # middlebox or a crashed host, rather than an orderly FIN.
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _lanes_of(direction: Direction) -> tuple[Literal["up", "down"], ...]:
    if direction == "both":
        return _DIRECTIONS
    if direction in _DIRECTIONS:
        return (direction,)
    raise ValueError(f"direction must be 'up', 'down' or 'both', not {direction!r}")


class FaultProxy:
    """The proxy on an asyncio loop. Control methods are plain calls made on the loop's thread."""

    def __init__(self, upstream: tuple[str, int], *, port: int = 0, connect_timeout: float = 5.0) -> None:
        self.upstream = upstream
        self._port = port
        self._connect_timeout = connect_timeout
        self._server: asyncio.Server | None = None
        self._lanes: dict[str, _Lane] = {}
        self._refuse = False
        self._connections: set[_Connection] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._stats = ProxyStats()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> FaultProxy:
        self._lanes = {lane: _Lane() for lane in _DIRECTIONS}
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self._port)
        log.info("fault proxy listening", extra={"port": self.port, "upstream": self.upstream})
        return self

    async def aclose(self) -> None:
        """Stop listening and reset every connection."""
        if self._server is not None:
            self._server.close()
        self.cut()
        for handler in list(self._handlers):
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # Faults -----------------------------------------------------------------------------

    def delay(self, seconds: float, direction: Direction = "both") -> None:
        if seconds < 0:
            raise ValueError(f"delay must be >= 0, not {seconds}")
        for lane in _lanes_of(direction):
            self._lanes[lane].delay = seconds

    def hold(self, direction: Direction = "both", *, after: int = 0) -> None:
        """Hold ``direction`` now, or, with ``after=N``, as the N-th chunk from now arrives
        in the other direction (only for "up" or "down")."""
        if after < 0:
            raise ValueError(f"after must be >= 0, not {after}")
        lanes = _lanes_of(direction)
        if after == 0:
            for lane in lanes:
                self._lanes[lane].flowing.clear()
            return
        if len(lanes) != 1:
            raise ValueError("hold(after=N) holds one direction, 'up' or 'down'")
        other = "up" if lanes[0] == "down" else "down"
        self._lanes[other].hold_other_after = after

    def release(self, direction: Direction = "both") -> None:
        for lane in _lanes_of(direction):
            self._lanes[lane].flowing.set()

    def cut_after(self, chunks: int, direction: Literal["up", "down"] = "down") -> None:
        """Reset the connection that forwards the ``chunks``-th chunk from now in
        ``direction``, 0.1 s after forwarding it (an answer cut half-way)."""
        if chunks < 1:
            raise ValueError(f"chunks must be >= 1, not {chunks}")
        self._lanes[direction].cut_after = chunks

    def drop(self, direction: Direction = "both") -> None:
        for lane in _lanes_of(direction):
            self._lanes[lane].drop = True

    def refuse(self, refuse: bool = True) -> None:
        self._refuse = refuse

    def cut(self) -> int:
        """Reset every open connection; returns how many."""
        connections = list(self._connections)
        for connection in connections:
            connection.reset()
        self._connections.clear()
        self._stats.resets += len(connections)
        self._stats.open = 0
        return len(connections)

    def heal(self) -> None:
        """No delay, hold, drop or refusal; connections that lost bytes are reset."""
        for lane in self._lanes.values():
            lane.delay = 0.0
            lane.drop = False
            lane.hold_other_after = 0
            lane.cut_after = 0
            lane.flowing.set()
        self._refuse = False
        dark = [connection for connection in self._connections if connection.dark]
        for connection in dark:
            connection.reset()
            self._connections.discard(connection)
        self._stats.resets += len(dark)
        self._stats.open = len(self._connections)

    def set_upstream(self, upstream: tuple[str, int]) -> None:
        """Send new connections to ``upstream`` (open ones keep theirs)."""
        self.upstream = upstream

    def stats(self) -> ProxyStats:
        return dataclasses.replace(self._stats)

    # Forwarding ---------------------------------------------------------------------------

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        try:
            await self._serve(client_reader, client_writer)
        finally:
            self._handlers.discard(handler)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._stats.connections += 1
        if self._refuse:
            self._stats.refused += 1
            self._stats.resets += 1
            _reset(client_writer)
            return
        try:
            server_reader, server_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream), self._connect_timeout
            )
        except (OSError, TimeoutError) as exc:
            self._stats.upstream_failures += 1
            log.info("fault proxy: upstream unreachable", extra={"upstream": self.upstream, "error": str(exc)})
            _reset(client_writer)
            return
        connection = _Connection(client_writer, server_writer)
        self._connections.add(connection)
        self._stats.open = len(self._connections)
        readers = {"up": client_reader, "down": server_reader}
        for lane in _DIRECTIONS:
            queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUE_CHUNKS)
            connection.tasks.append(asyncio.create_task(self._read(connection, lane, readers[lane], queue)))
            connection.tasks.append(asyncio.create_task(self._write(connection, lane, queue)))
        try:
            await asyncio.gather(*connection.tasks)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for task in connection.tasks:
                task.cancel()
            if connection in self._connections:
                self._connections.discard(connection)
                self._stats.open = len(self._connections)
            for writer in connection.writers.values():
                writer.transport.abort()

    async def _read(
        self,
        connection: _Connection,
        lane: Literal["up", "down"],
        reader: asyncio.StreamReader,
        queue: asyncio.Queue[tuple[float, bytes]],
    ) -> None:
        loop = asyncio.get_running_loop()
        state = self._lanes[lane]
        while True:
            try:
                data = await reader.read(_CHUNK)
            except OSError:
                data = _EOF
            if data and (state.drop or connection.dark):
                connection.dark = True
                if lane == "up":
                    self._stats.dropped_up += len(data)
                else:
                    self._stats.dropped_down += len(data)
                continue
            if data and state.hold_other_after:
                state.hold_other_after -= 1
                if not state.hold_other_after:  # before this chunk goes on: its answer will wait
                    self._lanes["down" if lane == "up" else "up"].flowing.clear()
            await queue.put((loop.time() + state.delay, data))
            if not data:
                return

    async def _write(
        self, connection: _Connection, lane: Literal["up", "down"], queue: asyncio.Queue[tuple[float, bytes]]
    ) -> None:
        loop = asyncio.get_running_loop()
        state = self._lanes[lane]
        writer = connection.writers[lane]
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            await state.flowing.wait()
            if not data:
                # The sender closed its side: pass the half-close on, as TCP would.
                if writer.can_write_eof():
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                return
            if connection.dark:
                continue
            writer.write(data)
            await writer.drain()
            if lane == "up":
                self._stats.bytes_up += len(data)
            else:
                self._stats.bytes_down += len(data)
            if state.cut_after:
                state.cut_after -= 1
                if not state.cut_after:
                    await asyncio.sleep(CUT_AFTER_GRACE)  # the peer reads what was forwarded
                    self._connections.discard(connection)
                    self._stats.resets += 1
                    self._stats.open = len(self._connections)
                    connection.reset()
                    return


class ThreadedFaultProxy:
    """A FaultProxy on its own event loop in a daemon thread, controlled from any thread.

    Every control call runs on the proxy's loop and has taken effect when it returns.
    """

    def __init__(self, upstream: tuple[str, int], *, port: int = 0, connect_timeout: float = 5.0) -> None:
        self._proxy = FaultProxy(upstream, port=port, connect_timeout=connect_timeout)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ThreadedFaultProxy:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="kubecoord-fault-proxy", daemon=True)
        self._thread.start()
        self._submit(self._proxy.start())
        return self

    def close(self) -> None:
        if self._loop is None or self._thread is None:
            return
        with contextlib.suppress(RuntimeError):
            self._submit(self._proxy.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> ThreadedFaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self._proxy.port

    @property
    def address(self) -> str:
        return self._proxy.address

    @property
    def upstream(self) -> tuple[str, int]:
        return self._proxy.upstream

    def delay(self, seconds: float, direction: Direction = "both") -> None:
        self._call(self._proxy.delay, seconds, direction)

    def hold(self, direction: Direction = "both", *, after: int = 0) -> None:
        self._call(lambda: self._proxy.hold(direction, after=after))

    def release(self, direction: Direction = "both") -> None:
        self._call(self._proxy.release, direction)

    def cut_after(self, chunks: int, direction: Literal["up", "down"] = "down") -> None:
        self._call(self._proxy.cut_after, chunks, direction)

    def drop(self, direction: Direction = "both") -> None:
        self._call(self._proxy.drop, direction)

    def refuse(self, refuse: bool = True) -> None:
        self._call(self._proxy.refuse, refuse)

    def cut(self) -> int:
        return self._call(self._proxy.cut)

    def heal(self) -> None:
        self._call(self._proxy.heal)

    def set_upstream(self, upstream: tuple[str, int]) -> None:
        self._call(self._proxy.set_upstream, upstream)

    def stats(self) -> ProxyStats:
        return self._call(self._proxy.stats)

    def _call(self, method: Callable[..., T], *args: Any) -> T:
        async def run() -> T:
            return method(*args)

        return self._submit(run())

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coroutine.close()
            raise RuntimeError("the proxy is not started")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)
