"""Contract: kubecoord.aio over every backend — the same answers as the blocking clients."""

from __future__ import annotations

import asyncio

import pytest

from kubecoord.aio import AsyncCoordinator

from .harness import Harness


def _run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_lock_handoff_and_tokens(harness: Harness, name: str) -> None:
    async def main() -> None:
        first, second = AsyncCoordinator(harness.connect()), AsyncCoordinator(harness.connect())
        holder, waiter = first.lock(name, id="a"), second.lock(name, id="b")
        async with holder:
            token = holder.token
            assert token is not None
            assert not await waiter.acquire(blocking=False)
            waiting = asyncio.create_task(waiter.acquire())
            await asyncio.sleep(0.3)
            assert not waiting.done()
        assert await asyncio.wait_for(waiting, harness.settle)
        assert waiter.token is not None and waiter.token > token
        assert [h.id for h in await holder.holders()] == ["b"]
        await waiter.release()

    _run(main())


def test_watch_and_runner(harness: Harness, name: str) -> None:
    async def main() -> None:
        observer = await AsyncCoordinator(harness.connect()).leader_election(name)
        runner = await AsyncCoordinator(harness.connect()).leader_election(name)
        seen: list[str | None] = []
        epochs: list[int] = []

        async def consume() -> None:
            async for leader in observer.watch():
                seen.append(leader)
                if leader == "r":
                    return

        async def lead(epoch: int, stop: asyncio.Event) -> None:
            epochs.append(epoch)
            await stop.wait()

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0.2)
        task = asyncio.create_task(runner.run(lead, candidate_id="r"))
        await asyncio.wait_for(consumer, harness.settle)
        for _ in range(int(harness.settle * 10)):  # the observer may hear of it before lead() runs
            if epochs:
                break
            await asyncio.sleep(0.1)
        assert seen[-1] == "r" and len(epochs) == 1
        leader = await observer.get_leader()
        assert leader is not None and leader.epoch == epochs[0]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(int(harness.settle * 10)):
            if await observer.get_leader() is None:
                break
            await asyncio.sleep(0.1)
        assert await observer.get_leader() is None  # resigned on cancel

    _run(main())


def test_storage_round_trip(harness: Harness, name: str) -> None:
    async def main() -> None:
        coord = AsyncCoordinator(harness.connect())
        store = await coord.storage(name)
        assert await store.put("a/b", "1") == 1
        assert await store.update("a/b", "2", expected_version=1) == 2
        assert await store.fetch("a/b") == "2"
        assert await store.children("a") == {"b"}

    _run(main())
