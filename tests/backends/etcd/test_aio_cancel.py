"""kubecoord.aio on etcd, cancelled at the worst moments: an acquire cancelled twice while
it waits, or at any point of a free lock's acquire, and a release cancelled twice. When the
cancelled call returns, nothing it won stays: etcdctl sees no key of it under the lock's
prefix, and `etcdctl lock` gets the lock at once."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

import kubecoord.aio
from kubecoord_testkit.servers.etcd import EtcdCluster

from .etcdctl import Etcdctl, keys
from .timings import TIMINGS


async def _cancel_twice(task: asyncio.Task[object], after: float) -> bool:
    """Cancel ``task`` twice after ``after`` seconds; whether it ended cancelled (False: it
    had already finished)."""
    await asyncio.sleep(after)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()  # a timeout, then a shutdown
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return task.cancelled()


def _etcdctl_gets_it(etcd: EtcdCluster, name: str, peers: list[Etcdctl]) -> None:
    peer = Etcdctl(etcd, "lock", "--ttl", "2", name, "echo", "etcdctl-holds")
    peers.append(peer)
    assert peer.next_line(10) == "etcdctl-holds"  # nothing of kubecoord's stands in its way


def test_an_acquire_cancelled_twice_while_waiting_leaves_no_key(etcd_server: EtcdCluster) -> None:
    name = f"ac-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        coord = await kubecoord.aio.connect(f"etcd://{etcd_server.hosts}", **TIMINGS)
        holder, waiter = coord.lock(name, id="holder"), coord.lock(name, id="waiter")
        assert await holder.acquire(timeout=10)
        task = asyncio.create_task(waiter.acquire())
        while len(keys(etcd_server, f"{name}/")) < 2:  # the waiter queued its key
            await asyncio.sleep(0.05)
        assert await _cancel_twice(task, 0.0)
        assert not waiter.is_held()
        assert len(keys(etcd_server, f"{name}/")) == 1  # only the holder's
        await holder.release()
        assert keys(etcd_server, f"{name}/") == []
        await coord.close()

    asyncio.run(main())


@pytest.mark.parametrize("after", [0.0, 0.005, 0.02, 0.05, 0.1, 0.2])
def test_a_free_locks_acquire_cancelled_twice_at_any_moment_leaves_nothing_held(
    etcd_server: EtcdCluster, etcdctls: list[Etcdctl], after: float
) -> None:
    name = f"ac-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        coord = await kubecoord.aio.connect(f"etcd://{etcd_server.hosts}", **TIMINGS)
        lock = coord.lock(name, id="a")
        task = asyncio.create_task(lock.acquire())
        if not await _cancel_twice(task, after):  # it won before the cancellation came
            assert task.result() is True and lock.is_held()
            await lock.release()
        assert not lock.is_held()
        assert keys(etcd_server, f"{name}/") == [], "a cancelled acquire left its key"
        _etcdctl_gets_it(etcd_server, name, etcdctls)
        await coord.close()

    asyncio.run(main())


def test_a_release_cancelled_twice_has_released_when_it_returns(
    etcd_server: EtcdCluster, etcdctls: list[Etcdctl]
) -> None:
    name = f"ac-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        coord = await kubecoord.aio.connect(f"etcd://{etcd_server.hosts}", **TIMINGS)
        lock = coord.lock(name, id="a")
        assert await lock.acquire(timeout=10)
        await _cancel_twice(asyncio.create_task(lock.release()), 0.0)  # (cancelled, or done first)
        assert not lock.is_held()
        assert keys(etcd_server, f"{name}/") == []  # released before CancelledError arrived
        _etcdctl_gets_it(etcd_server, name, etcdctls)
        await coord.close()

    asyncio.run(main())
