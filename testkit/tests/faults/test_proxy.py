"""The fault proxy against a real TCP server: each fault as a client sees it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from kubecoord_testkit.faults import FaultProxy

pytestmark = pytest.mark.asyncio


class Upstream:
    """A line server on 127.0.0.1: answers every line with 'echo:' + line, records what it got."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> Upstream:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        return ("127.0.0.1", self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while line := await reader.readline():
                self.received.append(line)
                writer.write(b"echo:" + line)
                await writer.drain()
        writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest_asyncio.fixture
async def upstream() -> AsyncIterator[Upstream]:
    server = await Upstream().start()
    yield server
    await server.close()


@pytest_asyncio.fixture
async def proxy(upstream: Upstream) -> AsyncIterator[FaultProxy]:
    proxy = await FaultProxy(upstream.address).start()
    yield proxy
    await proxy.aclose()


async def open_client(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def nothing_arrives(reader: asyncio.StreamReader, seconds: float = 0.4) -> bool:
    try:
        data = await asyncio.wait_for(reader.readline(), seconds)
    except TimeoutError:
        return True
    raise AssertionError(f"expected nothing, got {data!r}")


async def test_transparent_by_default(proxy: FaultProxy, upstream: Upstream) -> None:
    reader, writer = await open_client(proxy)
    for index in range(3):
        writer.write(f"line {index}\n".encode())
        assert await reader.readline() == f"echo:line {index}\n".encode()
    stats = proxy.stats()
    assert stats.connections == 1 and stats.open == 1
    assert stats.bytes_up == sum(len(line) for line in upstream.received)
    assert stats.bytes_down == stats.bytes_up + 3 * len(b"echo:")
    writer.close()


async def test_listens_on_loopback_only(proxy: FaultProxy) -> None:
    assert proxy._server is not None
    assert {sock.getsockname()[0] for sock in proxy._server.sockets} == {"127.0.0.1"}


async def test_delay_adds_latency_each_way(proxy: FaultProxy) -> None:
    reader, writer = await open_client(proxy)
    proxy.delay(0.3, "up")
    started = time.monotonic()
    writer.write(b"a\n")
    assert await reader.readline() == b"echo:a\n"
    one_way = time.monotonic() - started
    proxy.delay(0.3)
    started = time.monotonic()
    writer.write(b"b\n")
    assert await reader.readline() == b"echo:b\n"
    both_ways = time.monotonic() - started
    # Lower bounds only: a loaded machine makes the round trips slower, never faster.
    assert one_way >= 0.3
    assert both_ways >= 0.6
    writer.close()


async def test_hold_buffers_then_delivers_in_order(proxy: FaultProxy, upstream: Upstream) -> None:
    reader, writer = await open_client(proxy)
    proxy.hold()
    writer.write(b"1\n2\n3\n")
    assert await nothing_arrives(reader)
    assert upstream.received == []
    proxy.release()
    assert [await reader.readline() for _ in range(3)] == [b"echo:1\n", b"echo:2\n", b"echo:3\n"]
    assert proxy.stats().open == 1
    writer.close()


async def test_hold_one_direction(proxy: FaultProxy, upstream: Upstream) -> None:
    reader, writer = await open_client(proxy)
    proxy.hold("down")
    writer.write(b"x\n")
    # The server gets the request; its answer waits.
    for _ in range(100):
        if upstream.received:
            break
        await asyncio.sleep(0.02)
    assert upstream.received == [b"x\n"]
    assert await nothing_arrives(reader)
    proxy.release("down")
    assert await reader.readline() == b"echo:x\n"
    writer.close()


async def test_hold_after_chunks_lets_the_first_answers_through(proxy: FaultProxy, upstream: Upstream) -> None:
    """hold("down", after=2): the first request is answered, the second reaches the server
    and its answer waits (a read, then a write whose answer a cut() would lose)."""
    reader, writer = await open_client(proxy)
    proxy.hold("down", after=2)
    writer.write(b"read\n")
    assert await reader.readline() == b"echo:read\n"
    writer.write(b"write\n")
    for _ in range(100):
        if len(upstream.received) == 2:
            break
        await asyncio.sleep(0.02)
    assert upstream.received == [b"read\n", b"write\n"]
    assert await nothing_arrives(reader)
    proxy.release("down")
    assert await reader.readline() == b"echo:write\n"
    with pytest.raises(ValueError):
        proxy.hold("both", after=1)
    writer.close()


async def test_drop_is_a_blackhole_and_heal_resets_the_damaged_connection(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    reader, writer = await open_client(proxy)
    proxy.drop()
    writer.write(b"lost\n")
    assert await nothing_arrives(reader)
    assert upstream.received == []
    assert proxy.stats().dropped_up == len(b"lost\n")
    # A connection opened during the blackhole is accepted but carries nothing.
    reader2, writer2 = await open_client(proxy)
    writer2.write(b"also lost\n")
    assert await nothing_arrives(reader2)
    proxy.heal()
    # Never a stream with a hole in it: the damaged connections are reset.
    for damaged in (reader, reader2):
        with contextlib.suppress(ConnectionResetError):
            assert await asyncio.wait_for(damaged.read(), 5) == b""
    reader3, writer3 = await open_client(proxy)
    writer3.write(b"back\n")
    assert await reader3.readline() == b"echo:back\n"
    assert proxy.stats().resets == 2
    for w in (writer, writer2, writer3):
        w.close()


async def test_cut_resets_open_connections(proxy: FaultProxy) -> None:
    reader, writer = await open_client(proxy)
    writer.write(b"before\n")
    assert await reader.readline() == b"echo:before\n"
    proxy.hold("down")
    writer.write(b"buffered\n")
    await asyncio.sleep(0.1)
    assert proxy.cut() == 1
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(), 5)
    proxy.release()
    reader2, writer2 = await open_client(proxy)
    writer2.write(b"after\n")
    assert await reader2.readline() == b"echo:after\n"
    assert proxy.stats().resets == 1
    writer2.close()


async def test_cut_after_forwards_the_counted_chunk_then_resets_its_connection(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    reader, writer = await open_client(proxy)
    writer.write(b"first\n")
    assert await reader.readline() == b"echo:first\n"
    proxy.cut_after(1, "down")
    writer.write(b"second\n")
    assert await reader.readline() == b"echo:second\n"  # the counted chunk arrives ...
    with pytest.raises(ConnectionResetError):  # ... then the connection is reset
        await asyncio.wait_for(reader.read(), 5)
    assert proxy.stats().resets == 1
    reader2, writer2 = await open_client(proxy)  # the count is spent: new connections flow
    writer2.write(b"third\n")
    writer2.write(b"fourth\n")
    assert await reader2.readline() == b"echo:third\n"
    assert await reader2.readline() == b"echo:fourth\n"
    writer2.close()


async def test_refuse_resets_new_connections(proxy: FaultProxy) -> None:
    proxy.refuse()
    reader, writer = await open_client(proxy)
    with pytest.raises(ConnectionResetError):
        writer.write(b"x\n")
        await asyncio.wait_for(reader.read(), 5)
    proxy.heal()
    reader2, writer2 = await open_client(proxy)
    writer2.write(b"y\n")
    assert await reader2.readline() == b"echo:y\n"
    assert proxy.stats().refused == 1
    writer2.close()


async def test_set_upstream_redirects_new_connections(proxy: FaultProxy) -> None:
    other = await Upstream().start()
    try:
        proxy.set_upstream(other.address)
        reader, writer = await open_client(proxy)
        writer.write(b"z\n")
        assert await reader.readline() == b"echo:z\n"
        assert other.received == [b"z\n"]
        writer.close()
    finally:
        await other.close()


async def test_unreachable_upstream_resets_the_client() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    proxy = await FaultProxy(("127.0.0.1", dead_port)).start()
    try:
        reader, _writer = await open_client(proxy)
        with contextlib.suppress(ConnectionResetError):
            assert await asyncio.wait_for(reader.read(), 5) == b""
        assert proxy.stats().upstream_failures == 1
    finally:
        await proxy.aclose()
