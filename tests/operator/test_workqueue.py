"""The controller's work queue keeps client-go's contract: de-duplicated keys, never one
key in two workers at once, a key added during its processing comes back after ``done``,
per-key exponential backoff that ``forget`` resets, one timer per key."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kubecoord.operator.controller.workqueue import ShutDown, WorkQueue


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_keys_added_many_times_are_processed_once_in_order() -> None:
    async def main() -> list[str]:
        queue: WorkQueue[str] = WorkQueue()
        for key in ("a", "b", "a", "c", "b", "a"):
            queue.add(key)
        assert len(queue) == 3
        return [await queue.get() for _ in range(3)]

    assert run(main()) == ["a", "b", "c"]


def test_a_key_is_never_in_two_workers_and_comes_back_after_done() -> None:
    async def main() -> None:
        queue: WorkQueue[str] = WorkQueue()
        queue.add("a")
        first = await queue.get()
        queue.add("a")  # changed while a worker has it
        assert len(queue) == 0  # not handed to a second worker
        second = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0.05)
        assert not second.done()
        queue.done(first)
        assert await asyncio.wait_for(second, 1) == "a"
        queue.done("a")
        assert len(queue) == 0 and queue.processing == 0

    run(main())


def test_parallel_workers_never_share_a_key() -> None:
    async def main() -> int:
        queue: WorkQueue[int] = WorkQueue()
        busy: set[int] = set()
        processed = 0
        clash = False

        async def worker() -> None:
            nonlocal processed, clash
            while True:
                try:
                    key = await queue.get()
                except ShutDown:
                    return
                clash = clash or key in busy
                busy.add(key)
                await asyncio.sleep(0.001)
                busy.discard(key)
                processed += 1
                queue.done(key)

        workers = [asyncio.create_task(worker()) for _ in range(4)]
        for round_ in range(50):
            for key in range(5):
                queue.add(key)
            await asyncio.sleep(0.0005 * (round_ % 3))
        while len(queue) or queue.processing:
            await asyncio.sleep(0.01)
        queue.shut_down()
        await asyncio.gather(*workers)
        assert not clash
        return processed

    assert 5 <= int(run(main())) < 250  # type: ignore[call-overload]  # coalesced, never all 250


def test_backoff_doubles_per_failure_until_forget() -> None:
    async def main() -> list[float]:
        queue: WorkQueue[str] = WorkQueue(base_delay=0.02, max_delay=0.1)
        loop = asyncio.get_running_loop()
        waits = []
        for _ in range(4):
            queue.add_rate_limited("a")
            began = loop.time()
            key = await queue.get()
            waits.append(loop.time() - began)
            queue.done(key)
        assert queue.failures("a") == 4
        queue.forget("a")
        assert queue.failures("a") == 0
        return waits

    waits = run(main())
    assert isinstance(waits, list)
    # Never earlier than the backoff (a loaded machine may be later: no upper bound).
    for wait, expected in zip(waits, (0.02, 0.04, 0.08, 0.1), strict=True):
        assert wait >= expected - 0.005
    assert [WorkQueue(base_delay=0.02, max_delay=0.1).backoff(n) for n in range(5)] == [0.02, 0.04, 0.08, 0.1, 0.1]


def test_add_after_keeps_the_earliest_timer_and_threads_may_add() -> None:
    async def main() -> None:
        queue: WorkQueue[str] = WorkQueue()
        loop = asyncio.get_running_loop()
        queue.add_after("a", 5.0)
        queue.add_after("a", 0.02)
        queue.add_after("a", 3.0)
        began = loop.time()
        assert await asyncio.wait_for(queue.get(), 1) == "a"
        assert loop.time() - began < 1
        queue.done("a")
        await asyncio.sleep(0.05)
        assert len(queue) == 0  # the later timers were dropped, not fired
        threading.Thread(target=queue.add_threadsafe, args=("b",)).start()
        assert await asyncio.wait_for(queue.get(), 1) == "b"
        queue.discard("b")
        queue.shut_down()
        with pytest.raises(ShutDown):
            await queue.get()

    run(main())


def test_an_add_from_another_thread_wakes_a_waiting_worker_at_once() -> None:
    """kopf runs synchronous handlers in executor threads: an add from there must wake the
    worker waiting on the loop (a future completed off the loop would not)."""

    async def main() -> float:
        queue: WorkQueue[str] = WorkQueue()
        queue.add("first")
        assert await queue.get() == "first"  # binds the queue to this loop
        queue.done("first")
        loop = asyncio.get_running_loop()
        waiting = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0.01)
        began = loop.time()
        threading.Thread(target=queue.add, args=("second",)).start()
        assert await asyncio.wait_for(waiting, 5) == "second"
        return loop.time() - began

    assert float(run(main())) < 1.0  # type: ignore[arg-type]
