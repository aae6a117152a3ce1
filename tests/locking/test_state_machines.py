"""Lock and Semaphore as Hypothesis state machines: three processes (memory:// coordinators
sharing one state on a manual clock) acquire, release, close, crash and come back, write
to fenced storage, while any election-record write may fail or lose its answer
(tests/helpers.py's ScriptedTable in place of the state's record table).

After every step (listener deliveries and background withdrawals waited for):

- never two holders in their own view: at most one is_held() per lock (per semaphore
  slot; at most max_leases slots held, never one slot twice);
- a holder's view never exceeds what the store proves: the slot's record names it, at
  the epoch it reports as its token;
- tokens strictly increase per record (every successful acquire reports a token above
  every earlier one of that record);
- nothing held after release or close;
- fenced writes: a write fenced with a process's last token is refused exactly when a
  higher token of the same domain was accepted, and never refused while it holds.

Profiles (tests/conftest.py): ``ci`` (default) and ``thorough`` (10,000 examples):
``pytest --hypothesis-profile=thorough tests/locking/test_state_machines.py``.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import kubecoord
from kubecoord import CoordinationError, Fence, LockHeldError, LockNotHeldError
from kubecoord.aio import AsyncLock, AsyncSemaphore
from kubecoord.backends.memory.coordinator import MemoryCoordinator
from kubecoord.backends.memory.records import RecordTable
from kubecoord.testing import ManualClock, crash

from ..helpers import Fault, FencedWrites, ScriptedTable

SESSION_TIMEOUT = 3.0
PROCESSES = 3

faults = st.lists(st.sampled_from([Fault(), Fault("fail"), Fault("lost")]), max_size=3)
processes = st.sampled_from(range(PROCESSES))


class Process:
    def __init__(self, index: int, generation: int, machine: LockMachine) -> None:
        self.id = f"p{index}-{generation}"
        coord = kubecoord.connect(machine.url, clock=machine.clock, lease_duration=SESSION_TIMEOUT)
        assert isinstance(coord, MemoryCoordinator)
        self.coord = coord
        self.storage = coord.storage("guarded")
        self.lock: Any = machine.open(coord, self.id)
        self.last_token: int | None = None  # what this process would fence its writes with


class LockMachine(RuleBasedStateMachine):
    """Subclasses say what is held: a Lock (one slot) or a Semaphore of ``slots``."""

    slots = 1

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.url = f"memory://machine-{uuid.uuid4().hex[:8]}"
        first = kubecoord.connect(self.url, clock=self.clock, lease_duration=SESSION_TIMEOUT)
        assert isinstance(first, MemoryCoordinator)
        self.table = ScriptedTable(faulty_reads=False)
        first.state.records = self.table  # before any handle exists
        self.base = first
        first.storage("guarded").put("k", "0")
        self.generations = [0] * PROCESSES
        self.processes = [Process(i, 0, self) for i in range(PROCESSES)]
        self.gone: list[Process] = []
        self.tokens: dict[int, list[int]] = {}  # per slot, every token acquire() reported
        self.fenced = FencedWrites()

    def open(self, coord: kubecoord.Coordinator, holder: str) -> Any:
        raise NotImplementedError

    def teardown(self) -> None:
        event(f"holds: {min(sum(len(t) for t in self.tokens.values()), 5)}")
        for process in self.processes + self.gone:
            if not process.coord.crashed:
                process.coord.close()
        self.base.close()

    # -- helpers -------------------------------------------------------------------------
    def _quiesce(self) -> None:
        """Wait for what runs on other threads: listener deliveries and lock withdrawals."""
        for _ in range(5):
            for process in self.processes:
                if not process.coord.crashed:
                    process.coord.context.dispatcher.flush(10.0)
            withdrawing = [t for t in threading.enumerate() if t.name == "kubecoord-lock-withdraw"]
            if not withdrawing:
                return
            for thread in withdrawing:
                thread.join(10.0)

    def _scripted(self, script: list[Fault], action: Any) -> Any:
        self.table.script = list(script)
        try:
            return action()
        finally:
            self.table.script = []
            self._quiesce()

    def _slot_of(self, process: Process) -> int:
        slot = process.lock.slot
        return 0 if slot is None else int(slot)

    # -- rules ---------------------------------------------------------------------------
    @rule(i=processes, script=faults)
    def acquire(self, i: int, script: list[Fault]) -> None:
        process = self.processes[i]
        held = process.lock.is_held()
        try:
            acquired = self._scripted(script, lambda: process.lock.acquire(blocking=False))
        except LockHeldError:
            assert held
            return
        except CoordinationError:
            return  # the nomination failed; nothing held (checked below)
        assert not held, "acquire() succeeded on an object that already held"
        if acquired:
            token = process.lock.token
            assert token is not None
            slot = self._slot_of(process)
            self.tokens.setdefault(slot, []).append(token)
            process.last_token = token

    @rule(i=processes, script=faults)
    def release(self, i: int, script: list[Fault]) -> None:
        process = self.processes[i]
        held = process.lock.is_held()
        try:
            self._scripted(script, process.lock.release)
        except LockNotHeldError:
            assert not held
        assert not process.lock.is_held()

    @rule(i=processes, script=faults)
    def close(self, i: int, script: list[Fault]) -> None:
        process = self.processes[i]
        self._scripted(script, process.lock.close)
        assert not process.lock.is_held()
        process.lock = self.open(process.coord, process.id)

    @rule(i=processes)
    def crash_and_restart(self, i: int) -> None:
        """kill -9 of process i (its holds expire a lease later); a new process takes its place."""
        process = self.processes[i]
        crash(process.coord)
        self.gone.append(process)
        self.generations[i] += 1
        self.processes[i] = Process(i, self.generations[i], self)
        self._quiesce()

    @rule(seconds=st.sampled_from([0.1, 0.5, 1.0, 2.0, 3.0, 4.0]), script=faults)
    def advance(self, seconds: float, script: list[Fault]) -> None:
        self._scripted(script, lambda: self.clock.advance(seconds))

    @rule(i=processes, op=st.sampled_from(["put", "update", "delete"]))
    def fenced_write(self, i: int, op: str) -> None:
        process = self.processes[i]
        token = process.last_token
        if token is None or self.slots > 1:
            return  # a semaphore's tokens are per slot: fencing domains are per lock name
        self.fenced.write(process.storage, op, process.id, Fence(process.lock.name, token),
                          holding=process.lock.is_held())

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def never_two_holders(self) -> None:
        holders = [(self._slot_of(p), p.id) for p in self.processes if p.lock.is_held()]
        slots = [slot for slot, _ in holders]
        assert len(slots) == len(set(slots)), f"two holders of one slot at {self.clock.now()}: {holders}"
        assert len(holders) <= self.slots

    @invariant()
    def holders_view_is_what_the_store_holds(self) -> None:
        for process in self.processes:
            if not process.lock.is_held():
                continue
            token, slot = process.lock.token, self._slot_of(process)
            record = process.lock.name if self.slots == 1 else f"{process.lock.name}-{slot}"
            current = RecordTable.read(self.table, f"elections/{record}")
            assert current is not None
            written, _ = current
            assert (written.holder, written.transitions) == (process.id, token), (process.id, token, written)

    @invariant()
    def tokens_strictly_increase(self) -> None:
        for slot, tokens in self.tokens.items():
            assert tokens == sorted(set(tokens)), f"slot {slot}: tokens {tokens}"


class LockStateMachine(LockMachine):
    slots = 1

    def open(self, coord: kubecoord.Coordinator, holder: str) -> Any:
        return coord.lock("guarded-job", id=holder)


class SemaphoreStateMachine(LockMachine):
    slots = 2

    def open(self, coord: kubecoord.Coordinator, holder: str) -> Any:
        return coord.semaphore("pool", 2, id=holder)


class _AsyncHandle:
    """An AsyncLock or AsyncSemaphore driven from the machine's rules, one call at a time
    on the machine's event loop."""

    def __init__(self, machine: AsyncLockStateMachine, handle: AsyncLock) -> None:
        self._machine = machine
        self.handle = handle
        self.name = handle.name

    def acquire(self, blocking: bool = True) -> bool:
        return self._machine.loop.run_until_complete(self.handle.acquire(blocking=blocking))

    def release(self) -> None:
        self._machine.loop.run_until_complete(self.handle.release())

    def close(self) -> None:
        self._machine.loop.run_until_complete(self.handle.close())

    def is_held(self) -> bool:
        return self.handle.is_held()

    @property
    def token(self) -> int | None:
        return self.handle.token

    @property
    def slot(self) -> int | None:
        return self.handle.slot if isinstance(self.handle, AsyncSemaphore) else None


class AsyncLockStateMachine(LockMachine):
    """kubecoord.aio's AsyncLock (or AsyncSemaphore) under the Lock machine's rules, plus
    acquire() cancelled after some turns of the event loop, once or twice (a timeout,
    then a shutdown): afterwards nothing is held, and (with no fault scripted) the
    record does not name the process unless it named it before."""

    slots = 1

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kubecoord-aio-machine")
        super().__init__()

    def open(self, coord: kubecoord.Coordinator, holder: str) -> Any:
        if self.slots == 1:
            return _AsyncHandle(self, AsyncLock(coord.lock("guarded-job", id=holder), self.executor))
        return _AsyncHandle(self, AsyncSemaphore(coord.semaphore("pool", self.slots, id=holder), self.executor))

    def teardown(self) -> None:
        super().teardown()
        self.executor.shutdown(wait=True)
        self.loop.close()

    def _holder(self, process: Process) -> str | None:
        name = process.lock.name if self.slots == 1 else f"{process.lock.name}-0"
        current = RecordTable.read(self.table, f"elections/{name}")
        return current[0].holder if current is not None else None

    @rule(i=processes, script=faults, turns=st.integers(min_value=0, max_value=6), twice=st.booleans())
    def cancelled_acquire(self, i: int, script: list[Fault], turns: int, twice: bool) -> None:
        process = self.processes[i]
        if process.lock.is_held():
            return
        before = self._holder(process)

        handle: AsyncLock = process.lock.handle

        def run() -> bool:
            task = self.loop.create_task(handle.acquire(blocking=False))
            for _ in range(turns):
                self.loop.run_until_complete(asyncio.sleep(0))
            task.cancel()
            if twice:
                self.loop.run_until_complete(asyncio.sleep(0))
                task.cancel()
            return self.loop.run_until_complete(task)

        try:
            acquired = self._scripted(script, run)
        except asyncio.CancelledError:
            event("acquire() cancelled")
            assert not process.lock.is_held(), "held after a cancelled acquire()"
            if not script and before != process.id:
                assert self._holder(process) != process.id, "the record names a cancelled acquire()'s process"
            return
        except CoordinationError:
            return
        event("acquire() done before its cancellation")
        if acquired:
            token = process.lock.token
            assert token is not None
            self.tokens.setdefault(self._slot_of(process), []).append(token)
            process.last_token = token


class AsyncSemaphoreStateMachine(AsyncLockStateMachine):
    slots = 2


TestLockStateMachine = LockStateMachine.TestCase
TestSemaphoreStateMachine = SemaphoreStateMachine.TestCase
TestAsyncLockStateMachine = AsyncLockStateMachine.TestCase
TestAsyncSemaphoreStateMachine = AsyncSemaphoreStateMachine.TestCase
