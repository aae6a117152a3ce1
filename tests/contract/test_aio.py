"""Contract: kubecoord.aio over every backend — the same answers as the blocking clients."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubecoord import Fence, FencedError
from kubecoord.aio import AsyncCoordinator
from kubecoord.group_coordinator import UnitsProtocol

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


def test_calls_cancelled_over_and_over_leave_nothing_held(harness: Harness, name: str) -> None:
    """A lock, a candidacy, a group coordinator member and a membership, each asked for and cancelled on every turn of
    the loop from the moment its request is on its way (a timeout, a shutdown, anyio's
    re-delivery): the request wins on the server, the cancelled call withdraws it before
    it ends, and another coordinator gets each at once."""

    async def cancelled_over_and_over(call: Any) -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(call)
        await asyncio.sleep(0)  # the request is on a worker thread

        def again() -> None:
            if not task.done():
                task.cancel()
                loop.call_soon(again)

        again()
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("the call returned although cancelled before its thread answered")

    async def main() -> None:
        mine, other = AsyncCoordinator(harness.connect()), harness.connect()
        lock = mine.lock(name, id="a")
        await cancelled_over_and_over(lock.acquire())
        assert not lock.is_held()
        theirs = other.lock(name, id="b")
        assert theirs.acquire(blocking=False)
        theirs.release()

        election = await mine.leader_election(name)
        await cancelled_over_and_over(election.nominate("a"))
        assert not election.is_leader("a")
        assert other.leader_election(name).nominate("b")

        group = f"{name}-g"
        member = await mine.group_coordinator(group, UnitsProtocol(["u0"]), member_id="a")
        await cancelled_over_and_over(member.join(timeout=harness.settle))
        assert "a" not in other.group_membership(group).membership()
        await member.close()

        members = await mine.group_membership(name)
        await cancelled_over_and_over(members.join("a"))
        assert "a" not in other.group_membership(name).membership()
        other.group_membership(name).join("a")  # the id is free at once
        await mine.close()


def test_fenced_writes_between_lock_holders(harness: Harness, name: str) -> None:
    async def main() -> None:
        first, second = AsyncCoordinator(harness.connect()), AsyncCoordinator(harness.connect())
        holder, successor = first.lock(name, id="a"), second.lock(name, id="b")
        store, other = await first.storage(name), await second.storage(name)
        async with holder:
            token = holder.token
            assert token is not None
            assert await store.put("k", "a", fence=Fence(name, token)) == 1
        async with successor:
            assert successor.token is not None and successor.token > token
            assert await other.update("k", "b", fence=Fence(name, successor.token)) == 2
        with pytest.raises(FencedError):
            await store.update("k", "late", fence=Fence(name, token))
        with pytest.raises(FencedError):
            await store.delete("k", fence=Fence(name, token))

    _run(main())
