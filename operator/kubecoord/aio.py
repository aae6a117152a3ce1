"""kubecoord for asyncio: the same clients with ``async`` methods and async iterators.

Usage (a kopf handler, an aiohttp or FastAPI service)::

    coord = await kubecoord.aio.connect("kubernetes://billing")
    le = await coord.leader_election("billing-controller")
    await le.nominate("pod-a")
    async for leader in le.watch():          # the leader id, or None, on every change
        ...
    async with coord.lock("nightly") as lock:
        await export(fencing_token=lock.token)
    await le.run(lead)                       # async def lead(epoch, stop: asyncio.Event)
    await coord.close()

How it works: a thin layer over the thread-safe core. Every call that may wait on the
network or on another holder runs on this coordinator's own thread pool
(``loop.run_in_executor``), never on the loop; only calls the core answers from local
state (is_leader(), is_held(), token) run inline. Listeners cross threads with
``loop.call_soon_threadsafe(queue.put_nowait, value)``: the core's dispatcher thread
hands each value to an asyncio.Queue that ``watch()`` reads, so the loop never waits on a
lock the dispatcher holds. A waiting ``acquire()`` holds one pool thread until it returns.

Cancellation (a task cancelled once, twice — a timeout, then a shutdown — or over and
over, as anyio's cancel scopes re-deliver it): a cancelled call raises CancelledError
only once the work it started on a pool thread has ended, and it undoes what that work
won or registered:

============================  ==================================================
cancelled call                what is undone
============================  ==================================================
``connect()``                 the coordinator is closed
``coord.leader_election()``,  the handle is closed
``group_membership()``, ...
``acquire()`` (lock,          the attempt is withdrawn (its cancel event, within
semaphore)                    ~50 ms); a lock or slot won meanwhile is released
``nominate(id)``              the candidacy of ``id`` is withdrawn (led or not)
``join(id)``                  the member leaves
``group_coordinator()``,      the handle is closed; the member leaves (also
its ``join(timeout=)``        when cancelled waiting for its first assignment)
``watch()`` and the others    a listener added is removed
``run()``                     the runner stops (resigning if it leads)
release, resign, leave,       waited for: done when CancelledError is raised
put, update, delete, close
============================  ==================================================

The wait and the undo are shielded: cancellation delivered again while they run is
absorbed, and CancelledError is raised once they end. So when a cancelled call returns,
no thread of it is still working, nothing it won is held, and a write it made has
either happened or not (it is never still in flight). Not guaranteed: that the undo
succeeds when the backend does not answer (it is logged; what was won then expires as
if the process had died: a lock, candidacy or member after its lease or session).

Each candidate ``nominate()`` enters runs on an election handle of its own (opened on
first use), so withdrawing one candidacy (a cancelled nominate, close()) touches no
other; ``sync`` is the handle get_leader() and watch() use.

Guarantees: those of the synchronous interface (kubecoord.api), plus: no method blocks
the event loop on I/O or on another process. Not guaranteed: more concurrent waits than
the pool has threads (``max_workers``, default 32); a further wait queues behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Generic, Self, TypeVar, Unpack

from kubecoord.api import (
    Coordinator,
    Fence,
    GroupCoordinatorHandle,
    GroupCoordinatorOptions,
    GroupDescription,
    GroupMembership,
    GroupProtocol,
    Leader,
    LeaderElection,
    ListenerRegistry,
    Lock,
    LockHolder,
    Semaphore,
    Storage,
    Versioned,
)
from kubecoord.connect import connect as connect_sync
from kubecoord.errors import RebalanceInProgressError

_T = TypeVar("_T")
_V = TypeVar("_V")

AsyncLeadingCallback = Callable[[int, asyncio.Event], Awaitable[object]]

log = logging.getLogger("kubecoord.aio")


async def connect(url: str, *, max_workers: int = 32, **options: Any) -> AsyncCoordinator:
    """kubecoord.connect(url, **options) on a worker thread (it may read a kubeconfig and
    reach the server), wrapped for asyncio. Cancelled, it closes the coordinator it made."""
    executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kubecoord-aio")
    try:
        coordinator = await _call(executor, functools.partial(connect_sync, url, **options), undo=_close)
    except BaseException:
        executor.shutdown(wait=False)
        raise
    return AsyncCoordinator(coordinator, executor=executor)


def _close(handle: Any) -> None:
    handle.close()


async def _settled(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, however many times cancellation is delivered meanwhile."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([future])


def _submit(executor: Executor, fn: Callable[[], _T]) -> asyncio.Future[_T]:
    loop = asyncio.get_running_loop()
    try:
        return loop.run_in_executor(executor, fn)
    except RuntimeError:  # the pool was shut down (the coordinator closed meanwhile)
        return loop.run_in_executor(None, fn)


async def _call(
    executor: Executor,
    fn: Callable[[], _T],
    *,
    undo: Callable[[_T], object] | None = None,
    interrupt: Callable[[], object] | None = None,
) -> _T:
    """``fn()`` on a pool thread. Cancelled: ``interrupt()`` (asks the thread to give up),
    then — shielded from any further cancellation — wait for the thread to end and, if
    ``fn`` returned, ``undo(result)`` on a pool thread; CancelledError once both ended."""
    future = _submit(executor, fn)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if interrupt is not None:
            interrupt()
        await _settled(future)
        failed = future.cancelled() or future.exception() is not None  # (retrieves it: never logged as lost)
        if undo is not None and not failed:
            undone = _submit(executor, functools.partial(undo, future.result()))
            await _settled(undone)
            error = None if undone.cancelled() else undone.exception()
            if error is not None:
                log.warning("undoing a cancelled call failed: what it won expires by itself",
                            extra={"call": _name(fn), "error": str(error)})
        raise


def _name(fn: Callable[..., object]) -> str:
    inner = fn.func if isinstance(fn, functools.partial) else fn
    return getattr(inner, "__qualname__", repr(inner))


class _Bridge(Generic[_V]):
    """A listener that hands values from the core's dispatcher thread to an asyncio.Queue."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.queue: asyncio.Queue[_V] = asyncio.Queue()

    def __call__(self, value: _V) -> None:
        with contextlib.suppress(RuntimeError):  # the loop was closed: nobody is listening
            self._loop.call_soon_threadsafe(self.queue.put_nowait, value)


class _Async:
    def __init__(self, executor: ThreadPoolExecutor) -> None:
        self._executor = executor

    async def _run(
        self, fn: Callable[..., _T], *args: Any, undo: Callable[[_T], object] | None = None, **kwargs: Any
    ) -> _T:
        return await _call(self._executor, functools.partial(fn, *args, **kwargs), undo=undo)

    async def _listen(
        self, add: Callable[..., object], remove: Callable[..., object], *args: Any
    ) -> AsyncIterator[Any]:
        """Values a listener hears, from the next change on: ``add(*args, listener)`` on a
        worker thread (adding may start a watch), ``remove`` likewise once the consumer stops."""
        bridge: _Bridge[Any] = _Bridge(asyncio.get_running_loop())
        await self._run(add, *args, bridge, undo=lambda _: remove(*args, bridge))
        try:
            while True:
                yield await bridge.queue.get()
        finally:
            await _settled(_submit(self._executor, functools.partial(remove, *args, bridge)))


class AsyncCoordinator(_Async):
    """A Coordinator for asyncio; ``sync`` is the wrapped thread-safe coordinator."""

    def __init__(self, coordinator: Coordinator, *, executor: ThreadPoolExecutor | None = None) -> None:
        super().__init__(executor or ThreadPoolExecutor(max_workers=32, thread_name_prefix="kubecoord-aio"))
        self.sync = coordinator
        self.backend = coordinator.backend

    async def leader_election(self, service: str) -> AsyncLeaderElection:
        election = await self._run(self.sync.leader_election, service, undo=_close)
        return AsyncLeaderElection(election, self._executor, candidates=functools.partial(self.sync.leader_election,
                                                                                            service))

    async def group_membership(self, group: str) -> AsyncGroupMembership:
        return AsyncGroupMembership(await self._run(self.sync.group_membership, group, undo=_close), self._executor)

    async def storage(self, name: str) -> AsyncStorage:
        return AsyncStorage(await self._run(self.sync.storage, name, undo=_close), self._executor)

    async def listener_registry(self, name: str) -> AsyncListenerRegistry:
        return AsyncListenerRegistry(await self._run(self.sync.listener_registry, name, undo=_close), self._executor)

    async def group_coordinator(
        self, group: str, protocol: GroupProtocol, **options: Unpack[GroupCoordinatorOptions]
    ) -> AsyncGroupCoordinator:
        """Coordinator.group_coordinator, with its options (member_id, session_timeout,
        rebalance_timeout, history); the protocol's callbacks run on the member's own thread,
        as with the blocking handle."""
        member = await self._run(self.sync.group_coordinator, group, protocol, **options, undo=_close)
        return AsyncGroupCoordinator(member, self._executor)

    def lock(self, name: str, *, id: str | None = None, data: str = "") -> AsyncLock:
        """Makes no request (the sync lock opens its election at acquire())."""
        return AsyncLock(self.sync.lock(name, id=id, data=data), self._executor)

    def semaphore(self, name: str, max_leases: int, *, id: str | None = None, data: str = "") -> AsyncSemaphore:
        return AsyncSemaphore(self.sync.semaphore(name, max_leases, id=id, data=data), self._executor)

    async def close(self) -> None:
        await self._run(self.sync.close)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncLeaderElection(_Async):
    """A LeaderElection for asyncio. ``sync`` answers get_leader() and watch(); each
    candidate nominate() enters runs on an election handle of its own (``candidates()``
    opens one; without it, on ``sync``, and a cancelled nominate() then closes ``sync``)."""

    def __init__(
        self,
        election: LeaderElection,
        executor: ThreadPoolExecutor,
        *,
        candidates: Callable[[], LeaderElection] | None = None,
    ) -> None:
        super().__init__(executor)
        self.sync = election
        self.service = election.service
        self._open_candidate = candidates
        self._candidates: dict[str, LeaderElection] = {}
        self._candidates_lock = threading.Lock()

    def _candidate_handle(self, candidate_id: str) -> LeaderElection:
        """The handle ``candidate_id`` runs on (opened on first use; a worker thread)."""
        if self._open_candidate is None:
            return self.sync
        with self._candidates_lock:
            handle = self._candidates.get(candidate_id)
            if handle is None:
                handle = self._candidates[candidate_id] = self._open_candidate()
            return handle

    def _nominate(self, candidate_id: str, data: str) -> bool:
        return self._candidate_handle(candidate_id).nominate(candidate_id, data)

    def _withdraw(self, candidate_id: str) -> None:
        """Withdraw ``candidate_id``'s candidacy, led or not: close the handle it runs on."""
        if self._open_candidate is None:
            self.sync.close()
            return
        with self._candidates_lock:
            handle = self._candidates.pop(candidate_id, None)
        if handle is not None:
            handle.close()

    async def nominate(self, candidate_id: str, data: str = "") -> bool:
        """LeaderElection.nominate; cancelled, the candidacy it entered is withdrawn."""
        return await self._run(self._nominate, candidate_id, data, undo=lambda _: self._withdraw(candidate_id))

    async def get_leader(self) -> Leader | None:
        return await self._run(self.sync.get_leader)

    async def resign(self, candidate_id: str) -> None:
        with self._candidates_lock:
            handle = self._candidates.get(candidate_id, self.sync)
        await self._run(handle.resign, candidate_id)

    def _handles(self, candidate_id: str | None) -> list[tuple[str | None, LeaderElection]]:
        """``sync`` (the runner's candidates) and the handles of ``candidate_id``'s (or every) candidate."""
        with self._candidates_lock:
            handles = list(self._candidates.items())
        return [(candidate_id, self.sync)] + [(c, h) for c, h in handles if candidate_id in (None, c)]

    def is_leader(self, candidate_id: str | None = None) -> bool:
        """Answered from local state (the renew deadline, the session state): no I/O."""
        return any(handle.is_leader(c) for c, handle in self._handles(candidate_id))

    def leading_until(self, candidate_id: str | None = None) -> float | None:
        """Answered from local state: no I/O (kubecoord.api.LeaderElection.leading_until)."""
        deadlines = [d for c, handle in self._handles(candidate_id) if (d := handle.leading_until(c)) is not None]
        return max(deadlines, default=None)

    def watch(self) -> AsyncIterator[str | None]:
        """The leader id (or None) on every change, from the next change on; ends when the
        consumer stops iterating."""
        return self._listen(self.sync.add_listener, self.sync.remove_listener)

    async def run(
        self,
        on_started_leading: AsyncLeadingCallback,
        on_stopped_leading: Callable[[], Awaitable[object]] | None = None,
        *,
        candidate_id: str | None = None,
        data: str = "",
        check_interval: float = 0.05,
    ) -> None:
        """LeaderElection.run for coroutines: ``await on_started_leading(epoch, stop)`` on
        the loop while leading (``stop`` an asyncio.Event set when the term ends), the same
        rules. Cancelling the awaiting task ends the runner (resigning if it leads), and
        CancelledError is raised once it ended, however often cancellation is delivered.
        The runner owns the handle: it is closed when run returns."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()

        def started(epoch: int, term: threading.Event) -> None:
            # A worker thread of the sync runner: the coroutine runs on the loop; the term
            # event crosses into it with call_soon_threadsafe.
            async def guarded() -> None:
                event = asyncio.Event()
                watcher = loop.run_in_executor(self._executor, term.wait)
                watcher.add_done_callback(lambda _: event.set())
                await on_started_leading(epoch, event)

            asyncio.run_coroutine_threadsafe(guarded(), loop).result()

        def stopped() -> None:
            if on_stopped_leading is not None:
                asyncio.run_coroutine_threadsafe(_awaited(on_stopped_leading), loop).result()

        await _call(
            self._executor,
            functools.partial(
                self.sync.run,
                started,
                stopped,
                candidate_id=candidate_id,
                data=data,
                stop=stop,
                signals=False,
                check_interval=check_interval,
            ),
            interrupt=stop.set,
        )

    async def close(self) -> None:
        """Withdraw every candidacy of this object, then close ``sync``."""

        def close_all() -> None:
            with self._candidates_lock:
                handles, self._candidates = list(self._candidates.values()), {}
            for handle in handles:
                handle.close()
            self.sync.close()

        await self._run(close_all)


async def _awaited(fn: Callable[[], Awaitable[object]]) -> None:
    await fn()


class AsyncLock(_Async):
    """A Lock for asyncio (kubecoord.api.Lock's rules). ``async with`` acquires and releases."""

    def __init__(self, lock: Lock, executor: ThreadPoolExecutor) -> None:
        super().__init__(executor)
        self.sync = lock
        self.name = lock.name
        self.id = lock.id

    async def acquire(self, timeout: float | None = None, blocking: bool = True) -> bool:
        """Lock.acquire. Cancelled (once or many times): the attempt is withdrawn, a hold it
        won meanwhile released, and CancelledError raised once both are done."""
        cancel = threading.Event()
        return await _call(
            self._executor,
            functools.partial(self.sync.acquire, timeout, blocking, cancel=cancel),
            interrupt=cancel.set,
            undo=self._release_won,
        )

    def _release_won(self, won: bool) -> None:
        if won and self.sync.is_held():
            self.sync.release()

    async def release(self) -> None:
        await self._run(self.sync.release)

    def is_held(self) -> bool:
        """Answered from local state: no I/O."""
        return self.sync.is_held()

    def held_until(self) -> float | None:
        """Answered from local state: no I/O (kubecoord.api.Lock.held_until)."""
        return self.sync.held_until()

    @property
    def token(self) -> int | None:
        return self.sync.token

    async def holders(self) -> list[LockHolder]:
        return await self._run(self.sync.holders)

    async def close(self) -> None:
        await self._run(self.sync.close)

    async def __aenter__(self) -> Self:
        await self.acquire()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.sync.is_held():
            await self.release()


class AsyncSemaphore(AsyncLock):
    def __init__(self, semaphore: Semaphore, executor: ThreadPoolExecutor) -> None:
        super().__init__(semaphore, executor)
        self.max_leases = semaphore.max_leases
        self._semaphore = semaphore

    @property
    def slot(self) -> int | None:
        return self._semaphore.slot


class AsyncGroupMembership(_Async):
    def __init__(self, group: GroupMembership, executor: ThreadPoolExecutor) -> None:
        super().__init__(executor)
        self.sync = group
        self.group = group.group

    async def join(self, member_id: str, data: str = "") -> None:
        """GroupMembership.join; cancelled, the member it joined leaves."""
        await self._run(self.sync.join, member_id, data, undo=lambda _: self.sync.leave(member_id))

    async def leave(self, member_id: str) -> None:
        await self._run(self.sync.leave, member_id)

    async def membership_list(self) -> set[str]:
        return await self._run(self.sync.membership_list)

    async def membership(self) -> dict[str, str]:
        return await self._run(self.sync.membership)

    def watch(self) -> AsyncIterator[set[str]]:
        """The member ids after every change, from the next change on."""
        return self._listen(self.sync.add_listener, self.sync.remove_listener)

    async def close(self) -> None:
        await self._run(self.sync.close)


class AsyncGroupCoordinator(_Async):
    """A group coordinator member for asyncio (kubecoord.api.GroupCoordinatorHandle's rules)."""

    def __init__(self, member: GroupCoordinatorHandle, executor: ThreadPoolExecutor, *, poll: float = 0.02) -> None:
        super().__init__(executor)
        self.sync = member
        self.group = member.group
        self.member_id = member.member_id
        self.protocol = member.protocol
        self._poll = poll

    async def join(self, *, timeout: float | None = None) -> None:
        """GroupCoordinatorHandle.join; with ``timeout``, then wait that long (on the loop,
        from the member's local state) for its first assignment. Cancelled at any point,
        the join included, the member leaves before CancelledError is raised."""
        await self._run(self.sync.join, undo=lambda _: self.sync.leave())
        if timeout is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while not self.sync.is_stable():
                if loop.time() >= deadline:
                    raise RebalanceInProgressError(f"member {self.member_id!r} got no assignment within {timeout} s")
                await asyncio.sleep(self._poll)
        except asyncio.CancelledError:
            await _settled(_submit(self._executor, self.sync.leave))
            raise

    async def leave(self) -> None:
        await self._run(self.sync.leave)

    @property
    def generation(self) -> int:
        return self.sync.generation

    @property
    def assignment(self) -> bytes | None:
        return self.sync.assignment

    def is_stable(self) -> bool:
        """Answered from local state: no I/O."""
        return self.sync.is_stable()

    def ensure_generation(self, generation: int) -> None:
        """Answered from local state: no I/O (the fencing check before work)."""
        self.sync.ensure_generation(generation)

    async def request_rejoin(self) -> None:
        await self._run(self.sync.request_rejoin)

    async def describe(self) -> GroupDescription | None:
        return await self._run(self.sync.describe)

    async def close(self) -> None:
        await self._run(self.sync.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncStorage(_Async):
    def __init__(self, storage: Storage, executor: ThreadPoolExecutor) -> None:
        super().__init__(executor)
        self.sync = storage
        self.name = storage.name

    async def fetch(self, key: str) -> str | None:
        future = await self._run(self.sync.fetch, key)
        return await asyncio.wrap_future(future)

    async def fetch_versioned(self, key: str) -> Versioned | None:
        future = await self._run(self.sync.fetch_versioned, key)
        return await asyncio.wrap_future(future)

    async def put(self, key: str, data: str, *, fence: Fence | None = None) -> int:
        return await self._run(self.sync.put, key, data, fence=fence)

    async def update(
        self, key: str, data: str, *, expected_version: int | None = None, fence: Fence | None = None
    ) -> int:
        return await self._run(self.sync.update, key, data, expected_version=expected_version, fence=fence)

    async def delete(self, key: str, *, expected_version: int | None = None, fence: Fence | None = None) -> None:
        await self._run(self.sync.delete, key, expected_version=expected_version, fence=fence)

    async def children(self, namespace: str = "") -> set[str]:
        return await self._run(self.sync.children, namespace)

    async def close(self) -> None:
        await self._run(self.sync.close)


class AsyncListenerRegistry(_Async):
    def __init__(self, registry: ListenerRegistry, executor: ThreadPoolExecutor) -> None:
        super().__init__(executor)
        self.sync = registry
        self.name = registry.name

    def watch_value(self, key: str) -> AsyncIterator[str | None]:
        """The key's value (None once deleted) after every change, from the next change on."""
        return self._listen(self.sync.add_value_change_listener, self.sync.remove_value_change_listener, key)

    def watch_keys(self, namespace: str) -> AsyncIterator[set[str]]:
        """The namespace's child names after every change, from the next change on."""
        return self._listen(self.sync.add_key_set_change_listener, self.sync.remove_key_set_change_listener, namespace)

    async def close(self) -> None:
        await self._run(self.sync.close)
