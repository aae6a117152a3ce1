"""kubecoord.aio under cancellation, systematically: every call that acquires or registers
something (and every call that writes), cancelled at every point where it awaits a worker
thread — once, twice (a timeout, then a shutdown), and over and over (anyio's cancel
scopes deliver cancellation again on every turn of the loop until the task leaves them).

How the points are reached: the coordinator under test is the memory backend behind a
gate. Every call the aio layer makes on it stops twice on its worker thread — before it
runs ("enter") and after it returned, before its answer reaches the loop ("return"). The
driver lets the stops go one at a time and cancels the awaiting task at the stops a
scenario names, so "the lock was won just before the cancellation landed" is the stop
``return acquire``, reached every time, not a race to win. A scenario is run for every
stop its calls make (the undo's own stops included), and for every pair of them.

After each scenario: no worker thread of the call is still running when the task ends
(counted at the gate), and nothing is held or registered — checked through a second,
ungated coordinator on the same memory store, whose own attempt must go through at once
(another waiter proceeds). The memory backend runs on a ManualClock: a hold left behind
would never expire during the test.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

import kubecoord
from kubecoord import aio
from kubecoord.api import Coordinator
from kubecoord.group_coordinator import UnitsProtocol
from kubecoord.testing import ManualClock
from kubecoord.wire.group_record import derived_name

pytestmark = pytest.mark.asyncio

LOCAL = frozenset({"is_held", "is_leader", "token", "slot", "name", "id", "service", "group", "max_leases",
                   "backend", "namespace", "events", "is_stable", "ensure_generation", "member_id", "protocol"})
"""Answered from local state (on the loop's thread): never stopped at the gate."""
HANDLES = frozenset({"leader_election", "group_membership", "storage", "listener_registry", "group_coordinator"})
"""Coordinator calls that open a handle (on a worker thread): the handle is gated too."""
OBJECTS = frozenset({"lock", "semaphore"})
"""Coordinator calls made on the loop that make an object without a request."""
STUCK = 30.0
"""Seconds a stop may take to arrive before the scenario is declared stuck (a loaded machine)."""
IDLE = 0.3
"""Seconds without a stop after which a task not yet cancelled is cancelled where it waits
(watch()'s queue, run()'s leader, async with's body)."""


class Gate:
    """Stops every gated call twice on its worker thread until the driver lets it go."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.stops: asyncio.Queue[tuple[str, threading.Event]] = asyncio.Queue()
        self._lock = threading.Lock()
        self.in_flight = 0
        self.calls: list[str] = []
        self.opened: list[Gated] = []
        self.holding = False
        """False while a scenario is set up: calls go through without stopping."""

    def through(self, label: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with self._lock:
            self.in_flight += 1
            self.calls.append(label)
        try:
            self._stop(f"enter {label}")
            try:
                return fn(*args, **kwargs)
            finally:
                self._stop(f"return {label}")
        finally:
            with self._lock:
                self.in_flight -= 1

    def _stop(self, what: str) -> None:
        if not self.holding:
            return
        go = threading.Event()
        self._loop.call_soon_threadsafe(self.stops.put_nowait, (what, go))
        if not go.wait(2 * STUCK):
            raise AssertionError(f"the driver never let {what!r} go")


class Gated:
    """A proxy of a coordinator or handle whose calls (but LOCAL ones) stop at the gate."""

    def __init__(self, target: Any, gate: Gate, label: str) -> None:
        self._target = target
        self._gate = gate
        self._label = label
        self.closed = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name in LOCAL or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if name in OBJECTS:
                return Gated(attr(*args, **kwargs), self._gate, name)
            if name == "close":
                self.closed = True
            result = self._gate.through(f"{self._label}.{name}", attr, args, kwargs)
            if name in HANDLES:
                handle = Gated(result, self._gate, name)
                self._gate.opened.append(handle)
                return handle
            return result

        return call


@dataclass
class Outcome:
    stops: list[str] = field(default_factory=list)
    cancelled_at: list[str] = field(default_factory=list)
    left_running: int = 0
    cancelled: bool = False
    result: Any = None


async def drive(gate: Gate, task: asyncio.Task[Any], cancel_at: set[int], *, redeliver: bool = False) -> Outcome:
    """Let every stop go, in order, cancelling ``task`` at the stops numbered ``cancel_at``
    (and with ``redeliver``, again on every turn of the loop after the first cancellation,
    as anyio's cancel scopes do). A task waiting on the loop (no stop for IDLE seconds) is
    cancelled there. Counts the calls still in flight when the task ended."""
    loop = asyncio.get_running_loop()
    outcome = Outcome()
    redelivering = False

    def again() -> None:
        if not task.done():
            task.cancel()
            loop.call_soon(again)

    def cancel(what: str) -> None:
        nonlocal redelivering
        task.cancel()
        outcome.cancelled_at.append(what)
        if redeliver and not redelivering:
            redelivering = True
            loop.call_soon(again)

    idle_since = loop.time()
    while True:
        getter = asyncio.ensure_future(gate.stops.get())
        done, _ = await asyncio.wait([getter, task], timeout=IDLE, return_when=asyncio.FIRST_COMPLETED)
        if getter not in done:
            getter.cancel()
            if task.done():
                break
            if loop.time() - idle_since > STUCK:
                raise AssertionError(f"stuck after {outcome.stops}")
            if not outcome.cancelled_at:
                cancel("idle")  # waiting on the loop (or a thread waits on another party)
            continue
        idle_since = loop.time()
        what, go = getter.result()
        if len(outcome.stops) in cancel_at:
            cancel(what)
        outcome.stops.append(what)
        go.set()
    outcome.left_running = gate.in_flight
    # Let what a wrong implementation left running finish, so the next scenario starts clean.
    while gate.in_flight:
        try:
            _, go = await asyncio.wait_for(gate.stops.get(), STUCK)
        except TimeoutError:
            break
        go.set()
    outcome.cancelled = task.cancelled()
    if not outcome.cancelled and task.exception() is None:
        outcome.result = task.result()
    return outcome


@dataclass
class World:
    """One scenario's stores: ``coord`` (aio, gated) and ``plain`` (ungated, the judge)."""

    gate: Gate
    coord: aio.AsyncCoordinator
    plain: Coordinator
    inner: Coordinator
    timers: list[threading.Timer] = field(default_factory=list)
    """Started by the call under test; joined before the check."""

    def close(self) -> None:
        self.inner.close()
        self.plain.close()


@pytest.fixture
def url() -> str:
    return f"memory://cancel-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def world(url: str, clock: ManualClock) -> World:
    gate = Gate(asyncio.get_running_loop())
    inner = kubecoord.connect(url, clock=clock)
    coord = aio.AsyncCoordinator(cast(Coordinator, Gated(inner, gate, "coordinator")))
    return World(gate, coord, kubecoord.connect(url, clock=clock), inner)


Setup = Callable[[World], Awaitable[Callable[[], Awaitable[Any]]]]
"""Prepares a world (ungated steps) and returns the call under test."""
Check = Callable[[World, Outcome], Awaitable[None] | None]
"""Asserts nothing is held or registered (or, had the call completed, that it holds)."""


def plans(limit: int) -> Iterator[tuple[str, set[int], bool]]:
    for i in range(limit):
        yield f"once@{i}", {i}, False
        yield f"anyio@{i}", {i}, True
        for j in range(i + 1, limit):
            yield f"twice@{i},{j}", {i, j}, False


async def exercise(url: str, clock: ManualClock, setup: Setup, check: Check) -> int:
    """Every plan over the stops the call makes; returns how many scenarios ran."""
    async def scenario(cancel_at: set[int], redeliver: bool) -> Outcome:
        w = await world(f"{url}-{uuid.uuid4().hex[:6]}", clock)
        call = await setup(w)
        w.gate.calls.clear()
        w.gate.opened.clear()
        w.gate.holding = True
        task = asyncio.ensure_future(call())
        outcome = await drive(w.gate, task, cancel_at, redeliver=redeliver)
        assert outcome.left_running == 0, (
            f"the task ended with {outcome.left_running} call(s) still running on a worker thread "
            f"(cancelled at {outcome.cancelled_at}; stops {outcome.stops})"
        )
        w.gate.holding = False
        for timer in w.timers:
            timer.join(STUCK)
        checked = check(w, outcome)
        if checked is not None:
            await checked
        w.close()
        return outcome

    baseline = await scenario(set(), False)
    limit = len(baseline.stops) + 4  # the undo adds stops of its own
    ran = 0
    for label, cancel_at, redeliver in plans(limit):
        outcome = await scenario(cancel_at, redeliver)
        ran += 1
        if outcome.cancelled_at:
            assert outcome.cancelled, f"{label}: cancelled at {outcome.cancelled_at} but the call returned"
    return ran


# -- the calls ---------------------------------------------------------------------------


def _lock_check(make: str) -> Check:
    def check(w: World, outcome: Outcome) -> None:
        mine = w.plain.lock("job") if make == "lock" else w.plain.semaphore("job", 1)
        if outcome.cancelled:
            assert mine.acquire(blocking=False), f"held after the cancellation at {outcome.cancelled_at}"
            mine.release()
        else:
            assert outcome.result is True and not mine.acquire(blocking=False)

    return check


@pytest.mark.parametrize("make", ["lock", "semaphore"])
async def test_acquire(url: str, clock: ManualClock, make: str) -> None:
    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        lock = w.coord.lock("job") if make == "lock" else w.coord.semaphore("job", 1)
        return lock.acquire

    assert await exercise(url, clock, setup, _lock_check(make)) > 10


async def test_acquire_while_another_holds_then_releases(url: str, clock: ManualClock) -> None:
    """The waiter is cancelled at each stop while the holder lets go meanwhile: whatever
    it won is released, and the lock is free for a third party."""

    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        holder = w.plain.lock("job")
        assert holder.acquire(blocking=False)
        lock = w.coord.lock("job")

        async def call() -> bool:
            timer = threading.Timer(0.05, holder.release)
            w.timers.append(timer)
            timer.start()
            return await lock.acquire(timeout=STUCK)

        return call

    assert await exercise(url, clock, setup, _lock_check("lock")) > 10


async def test_async_with_lock(url: str, clock: ManualClock) -> None:
    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        lock = w.coord.lock("job")

        async def call() -> None:
            async with lock:
                await asyncio.sleep(3600)

        return call

    def check(w: World, outcome: Outcome) -> None:
        assert outcome.cancelled
        mine = w.plain.lock("job")
        assert mine.acquire(blocking=False), f"held after the cancellation at {outcome.cancelled_at}"

    assert await exercise(url, clock, setup, check) > 10


async def test_nominate(url: str, clock: ManualClock) -> None:
    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        election = await w.coord.leader_election("svc")
        return lambda: election.nominate("a")

    def check(w: World, outcome: Outcome) -> None:
        other = w.plain.leader_election("svc")
        if outcome.cancelled:
            assert w.plain.leader_election("svc").get_leader() is None, outcome.cancelled_at
            assert other.nominate("b"), "another candidate does not lead at once"
        else:
            assert outcome.result is True and not other.nominate("b")

    assert await exercise(url, clock, setup, check) > 10


async def test_join(url: str, clock: ManualClock) -> None:
    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        members = await w.coord.group_membership("g")
        return lambda: members.join("m1", "data")

    def check(w: World, outcome: Outcome) -> None:
        members = w.plain.group_membership("g")
        if outcome.cancelled:
            assert "m1" not in members.membership(), outcome.cancelled_at
            members.join("m1")  # the id is free again
        else:
            assert members.membership() == {"m1": "data"}

    assert await exercise(url, clock, setup, check) > 10


class SlowUnits(UnitsProtocol):
    """Takes its first assignment slowly: join(timeout=) is still waiting for it when the
    driver cancels an idle task."""

    def on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        threading.Event().wait(2 * IDLE)
        super().on_join_complete(generation, member_id, protocol, assignment)


@pytest.mark.parametrize("protocol", [UnitsProtocol, SlowUnits])
async def test_group_coordinator_join(url: str, clock: ManualClock, protocol: type[UnitsProtocol]) -> None:
    """Cancelled in the join or while waiting for the first assignment: the member leaves
    (out of the membership, its candidacy withdrawn), and the id is free at once."""

    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        member = await w.coord.group_coordinator("workers", protocol(["u0", "u1"]), member_id="m1",
                                                 session_timeout=2.0, rebalance_timeout=4.0)
        return lambda: member.join(timeout=STUCK)

    def check(w: World, outcome: Outcome) -> None:
        members = w.plain.group_membership("workers")
        if outcome.cancelled:
            assert "m1" not in members.membership(), f"still a member after {outcome.cancelled_at}"
            assert w.plain.leader_election(derived_name("workers")).get_leader() is None
            members.join("m1")
        else:
            assert "m1" in members.membership()

    assert await exercise(url, clock, setup, check) > 3


@pytest.mark.parametrize("kind", sorted(HANDLES))
async def test_opening_a_handle(url: str, clock: ManualClock, kind: str) -> None:
    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        if kind == "group_coordinator":
            return lambda: w.coord.group_coordinator("svc", UnitsProtocol(["u0"]), member_id="m1")
        return lambda: getattr(w.coord, kind)("svc")

    def check(w: World, outcome: Outcome) -> None:
        if outcome.cancelled:
            assert all(handle.closed for handle in w.gate.opened), f"a handle left open ({outcome.cancelled_at})"
        else:
            assert len(w.gate.opened) == 1 and not w.gate.opened[0].closed

    assert await exercise(url, clock, setup, check) > 3


async def test_watch_removes_its_listener(url: str, clock: ManualClock) -> None:
    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        election = await w.coord.leader_election("svc")

        async def call() -> None:
            async for _ in election.watch():
                pass

        return call

    def check(w: World, outcome: Outcome) -> None:
        assert outcome.cancelled
        added = w.gate.calls.count("leader_election.add_listener")
        assert added == w.gate.calls.count("leader_election.remove_listener"), (w.gate.calls, outcome.cancelled_at)

    assert await exercise(url, clock, setup, check) > 3


async def test_run_resigns(url: str, clock: ManualClock) -> None:
    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        election = await w.coord.leader_election("svc")

        async def lead(epoch: int, stop: asyncio.Event) -> None:
            await stop.wait()

        return lambda: election.run(lead, candidate_id="a")

    def check(w: World, outcome: Outcome) -> None:
        assert outcome.cancelled
        assert w.plain.leader_election("svc").nominate("b"), f"still led after {outcome.cancelled_at}"

    assert await exercise(url, clock, setup, check) > 3


@pytest.mark.parametrize("what", ["release", "resign", "leave", "put", "delete"])
async def test_undoing_calls_are_done_when_cancelled(url: str, clock: ManualClock, what: str) -> None:
    """A cancelled release, resign, leave or write has ended (or not started) when the
    task ends: never still on its way to the server after the caller moved on."""

    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        if what == "release":
            lock = w.coord.lock("job")
            await lock.acquire()
            return lock.release
        if what == "resign":
            election = await w.coord.leader_election("svc")
            await election.nominate("a")
            return lambda: election.resign("a")
        if what == "leave":
            members = await w.coord.group_membership("g")
            await members.join("m1")
            return lambda: members.leave("m1")
        store = await w.coord.storage("kv")
        if what == "put":
            return lambda: store.put("k", "v")
        await store.put("k", "v")
        return lambda: store.delete("k")

    def check(w: World, outcome: Outcome) -> None:
        started = any(stop.startswith("enter") for stop in outcome.stops)
        if what == "release":
            assert w.plain.lock("job").acquire(blocking=False) == started
        elif what == "resign":
            assert w.plain.leader_election("svc").nominate("b") == started
        elif what == "leave":
            assert ("m1" in w.plain.group_membership("g").membership()) != started
        elif what == "put":
            assert w.plain.storage("kv").fetch("k").result(STUCK) == ("v" if started else None)
        else:
            assert w.plain.storage("kv").fetch("k").result(STUCK) == (None if started else "v")

    assert await exercise(url, clock, setup, check) > 3


async def test_real_threads_cancelled_over_and_over_as_the_lock_is_let_go(url: str, clock: ManualClock) -> None:
    """Without a gate: a waiting acquire is cancelled on every turn of the loop (anyio's
    re-delivery) from a moment around the holder's release, twenty times; the lock is
    free after each (unless the call returned before the first cancellation: then it holds)."""
    coord = await aio.connect(url, clock=clock)
    plain = kubecoord.connect(url, clock=clock)
    loop = asyncio.get_running_loop()
    for attempt in range(20):
        holder = plain.lock("job")
        assert holder.acquire(blocking=False)
        waiter = coord.lock("job")
        task = asyncio.ensure_future(waiter.acquire())
        await asyncio.sleep(0.02)

        def again(task: asyncio.Task[bool] = task) -> None:
            if not task.done():
                task.cancel()
                loop.call_soon(again)

        threading.Timer(0.001 * attempt, holder.release).start()
        await asyncio.sleep(0.001 * (20 - attempt))
        again()
        try:
            won = await task  # (won before the first cancellation landed)
        except asyncio.CancelledError:
            won = False
        assert waiter.is_held() == won
        if won:
            await waiter.release()
        await asyncio.sleep(0.05)  # the holder's release timer has fired
        other = plain.lock("job")
        assert other.acquire(blocking=False), f"held after attempt {attempt}"
        other.release()
    await coord.close()
    plain.close()


async def test_connect_closes_what_it_opened(
    url: str, clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aio.connect() cancelled: the coordinator it made is closed. The coordinator comes
    from a backend of its own, installed through its entry point as any third-party
    backend is, whose connect() goes through the scenario's gate."""
    (tmp_path / "gated_backend.py").write_text(
        "HOOK = None\n\ndef connect(url, *, history=None, **options):\n    return HOOK(url, options)\n"
    )
    dist = tmp_path / "gated_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gated-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kubecoord.backends]\ngated = gated_backend:connect\n")
    monkeypatch.setattr(sys.modules["kubecoord.connect"], "_factories", {})  # gated's stays out of later tests
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = importlib.import_module("gated_backend")
    made: list[Gated] = []

    async def setup(w: World) -> Callable[[], Awaitable[Any]]:
        def hook(backend_url: Any, options: dict[str, Any]) -> Gated:
            coordinator = w.gate.through("connect", kubecoord.connect, (f"memory://{backend_url.location}",),
                                         {"clock": clock})
            made.append(Gated(coordinator, w.gate, "coordinator"))
            return made[-1]

        setattr(backend, "HOOK", hook)  # noqa: B010 (a module written by this test)
        made.clear()
        return lambda: aio.connect("gated://x")

    def check(w: World, outcome: Outcome) -> None:
        assert len(made) <= 1
        if outcome.cancelled:
            assert all(coordinator.closed for coordinator in made), f"left open ({outcome.cancelled_at})"
        else:
            assert len(made) == 1 and not made[0].closed
            made[0].close()

    try:
        assert await exercise(url, clock, setup, check) > 3
    finally:
        sys.modules.pop("gated_backend", None)
