"""kubecoord.aio on the memory backend: the same primitives, and the loop is never blocked.

Every test runs under ``loop_watch``: a coroutine that wakes every millisecond and
records how late it woke. A call that blocked the loop (a lock wait, a sleep) shows up
as a late wake-up. The limit is 25 ms, not 1-2: a loop that never blocks still wakes
late when the GIL is held by another thread for its switch interval (5 ms) or when this
2-core machine is loaded; a blocking acquire here waits hundreds of milliseconds. The
first test proves the watch fails on a 50 ms block.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
import traceback
import types
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TypeVar, cast

import pytest
import pytest_asyncio

import kubecoord
from kubecoord import aio

pytestmark = pytest.mark.asyncio

_T = TypeVar("_T")

LIMIT = 0.005
"""Seconds the loop thread may spend inside one blocking primitive."""
BLOCKING = frozenset({"acquire", "wait", "sleep", "join", "recv", "recv_into", "sendall", "connect", "result"})
"""Builtins that wait: lock and condition waits, sleeps, joins, socket reads and writes."""


class LoopWatch:
    """Times every call of a blocking builtin made on the loop's thread (a profile hook on
    that thread only) — except the selector's own wait, where an idle loop belongs.

    Why not a ticker that measures how late the loop wakes: on this shared 2-core machine
    (load ~10) the whole process is descheduled for 50-200 ms at a time, so wall-clock lag
    cannot tell a blocked loop from a busy machine; time spent inside a waiting call can.
    """

    def __init__(self) -> None:
        self.worst: tuple[float, str] = (0.0, "")
        self._started: list[tuple[float, str] | None] = []

    def _profile(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event == "c_call":
            name = getattr(arg, "__name__", "")
            selector = frame.f_code.co_filename.endswith("selectors.py")
            self._started.append(
                (time.perf_counter(), f"{name} in {frame.f_code.co_name}")
                if name in BLOCKING and not selector
                else None
            )
        elif event in ("c_return", "c_exception") and self._started:
            started = self._started.pop()
            if started is not None:
                took = time.perf_counter() - started[0]
                if took > self.worst[0] and not _starting_a_thread(frame):
                    self.worst = (took, started[1] + "\n" + "".join(traceback.format_stack(frame)[-6:]))

    def start(self) -> None:
        sys.setprofile(self._profile)

    def stop(self) -> tuple[float, str]:
        sys.setprofile(None)
        return self.worst


def _starting_a_thread(frame: types.FrameType | None) -> bool:
    """Thread.start() waits for the new thread to say it runs: a handshake, not I/O or
    another process (a pool's first calls start its threads), which a loaded machine
    can stretch to tens of milliseconds."""
    while frame is not None:
        if frame.f_code.co_name == "start" and frame.f_code.co_filename.endswith("threading.py"):
            return True
        frame = frame.f_back
    return False


@contextlib.asynccontextmanager
async def loop_watch() -> AsyncIterator[LoopWatch]:
    """Around a test body (on the loop's thread: the test's own coroutine)."""
    watch = LoopWatch()
    watch.start()
    try:
        yield watch
    finally:
        worst, where = watch.stop()
    assert worst < LIMIT, f"the event loop was blocked for {worst * 1000:.1f} ms ({where})"


@pytest_asyncio.fixture
async def url() -> str:
    return f"memory://aio-{uuid.uuid4().hex[:8]}"


async def test_the_loop_watch_catches_a_blocking_call() -> None:
    coord = kubecoord.connect(f"memory://aio-{uuid.uuid4().hex[:8]}")
    holder = coord.lock("job")
    holder.acquire()
    watch = LoopWatch()
    watch.start()
    await asyncio.sleep(0.01)
    coord.lock("job").acquire(timeout=0.2)  # what calling the sync lock on the loop would do
    await asyncio.sleep(0.01)
    worst, where = watch.stop()
    assert worst >= 0.1, (worst, where)
    coord.close()


async def test_lock_waits_without_blocking_the_loop(url: str) -> None:
    async with loop_watch():
        coord = await aio.connect(url)
        first, second = coord.lock("job"), coord.lock("job")
        async with first:
            assert first.is_held() and first.token is not None
            token = first.token
            assert not await second.acquire(blocking=False)
            assert not await second.acquire(timeout=0.2)  # waits 200 ms, on a worker thread
            waiter = asyncio.create_task(second.acquire())
            await asyncio.sleep(0.2)
            assert not waiter.done()
        assert await asyncio.wait_for(waiter, 5)
        assert second.token is not None and second.token > token
        assert [h.id for h in await first.holders()] == [second.id]
        await second.release()
        await coord.close()


async def test_cancelled_acquire_leaves_no_hold(url: str) -> None:
    async with loop_watch():
        coord = await aio.connect(url)
        holder, waiter = coord.lock("job"), coord.lock("job")
        await holder.acquire()
        task = asyncio.create_task(waiter.acquire())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await holder.release()
        await asyncio.sleep(0.2)
        assert await holder.holders() == []
        assert not waiter.is_held()
        await coord.close()


async def test_watch_yields_leaders(url: str) -> None:
    async with loop_watch():
        coord = await aio.connect(url)
        observer = await coord.leader_election("svc")
        candidate = await coord.leader_election("svc")
        seen: list[str | None] = []

        async def consume() -> None:
            async for leader in observer.watch():
                seen.append(leader)
                if leader is None and "a" in seen:
                    return

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        assert await candidate.nominate("a")
        assert candidate.is_leader("a")
        leader = await observer.get_leader()
        assert leader is not None and leader.id == "a"
        await candidate.resign("a")
        await asyncio.wait_for(consumer, 5)
        assert seen[0] == "a" and seen[-1] is None
        await coord.close()


async def test_async_runner_hands_over_and_stops_work(url: str) -> None:
    async with loop_watch():
        coord = await aio.connect(url)
        log: list[tuple[str, str, int]] = []

        async def runner(candidate: str) -> None:
            async def lead(epoch: int, stop: asyncio.Event) -> None:
                log.append(("started", candidate, epoch))
                await stop.wait()
                log.append(("stopped", candidate, epoch))

            election = await coord.leader_election("svc")
            await election.run(lead, candidate_id=candidate)

        first = asyncio.create_task(runner("a"))
        await asyncio.sleep(0.2)
        second = asyncio.create_task(runner("b"))
        await asyncio.sleep(0.2)
        assert [entry[:2] for entry in log] == [("started", "a")]
        first.cancel()  # resigns: b takes over
        with pytest.raises(asyncio.CancelledError):
            await first
        for _ in range(100):
            if len(log) >= 3:
                break
            await asyncio.sleep(0.02)
        assert [entry[:2] for entry in log] == [("started", "a"), ("stopped", "a"), ("started", "b")]
        assert log[2][2] > log[0][2]
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        await coord.close()


async def test_storage_and_registry(url: str) -> None:
    async with loop_watch():
        coord = await aio.connect(url)
        store = await coord.storage("kv")
        registry = await coord.listener_registry("kv")
        values: list[str | None] = []

        async def consume() -> None:
            async for value in registry.watch_value("a/b"):
                values.append(value)
                if value == "2":
                    return

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        assert await store.put("a/b", "1") == 1
        assert await store.update("a/b", "2", expected_version=1) == 2
        assert await store.fetch("a/b") == "2"
        versioned = await store.fetch_versioned("a/b")
        assert versioned is not None and versioned.version == 2
        assert await store.children("a") == {"b"}
        await asyncio.wait_for(consumer, 5)
        assert values[-1] == "2"
        with pytest.raises(kubecoord.KeyExistsError):
            await store.put("a/b", "x")
        await coord.close()


async def test_semaphore(url: str) -> None:
    async with loop_watch():
        coord = await aio.connect(url)
        sems = [coord.semaphore("pool", 2) for _ in range(3)]
        assert await sems[0].acquire() and await sems[1].acquire()
        assert {sems[0].slot, sems[1].slot} == {0, 1}
        assert not await sems[2].acquire(timeout=0.1)
        waiting = asyncio.create_task(sems[2].acquire())
        await asyncio.sleep(0.05)
        await sems[0].release()
        assert await asyncio.wait_for(waiting, 5)
        assert sems[2].slot is not None
        await coord.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_listeners_cross_into_the_loop_from_the_dispatcher_thread(url: str) -> None:
    """The bridge hands values over with call_soon_threadsafe: the queue is only touched on
    the loop's own thread."""
    touched: set[int] = set()

    async def main() -> None:
        loop_thread = threading.get_ident()
        coord = await aio.connect(url)
        election = await coord.leader_election("svc")
        original = asyncio.Queue.put_nowait

        def spy(self: asyncio.Queue[_T], item: _T) -> None:
            touched.add(threading.get_ident())
            original(self, item)

        asyncio.Queue.put_nowait = spy  # type: ignore[method-assign]
        try:
            # watch() is an async generator underneath (typed AsyncIterator): it has aclose()
            stream = cast(AsyncGenerator[str | None, None], election.watch())
            first = asyncio.ensure_future(stream.__anext__())
            await asyncio.sleep(0.05)
            await election.nominate("a")
            assert await asyncio.wait_for(first, 5) == "a"
            await stream.aclose()
        finally:
            asyncio.Queue.put_nowait = original  # type: ignore[method-assign]
        assert touched == {loop_thread}
        await coord.close()

    asyncio.run(main())


async def test_each_candidate_answers_from_its_own_handle(url: str) -> None:
    """Candidates of one AsyncLeaderElection run on handles of their own: is_leader() and
    leading_until() see each, resign() and close() withdraw them."""
    async with loop_watch():
        coord = await aio.connect(url)
        plain = kubecoord.connect(url)
        election = await coord.leader_election("svc")
        assert await election.nominate("a")
        assert not await election.nominate("b")
        assert election.is_leader() and election.is_leader("a") and not election.is_leader("b")
        until = election.leading_until("a")
        assert until is not None and election.leading_until() == until and election.leading_until("b") is None
        with pytest.raises(kubecoord.MemberExistsError):
            await election.nominate("a")
        await election.resign("a")
        for _ in range(100):  # "b" takes over
            if election.is_leader("b"):
                break
            await asyncio.sleep(0.02)
        assert election.is_leader("b") and not election.is_leader("a")
        await election.close()
        assert not election.is_leader()
        assert plain.leader_election("svc").nominate("c")  # nobody is left in the running
        await asyncio.to_thread(plain.close)  # the blocking client's close joins its threads: off the loop
        await coord.close()
