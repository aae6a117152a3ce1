"""A Semaphore as N locks: slot I is the lock record ``NAME-I`` (I = 0..max_leases-1).

Usage::

    sem = coord.semaphore("exporters", 3)
    with sem:                          # one of 3 slots
        export(shard=sem.slot, fencing_token=sem.token)

acquire() first tries every slot without waiting (lowest first); if all are held and it
may block, it waits on every slot at once (a thread per slot, each an ElectionLock
attempt driven by that record's watch) and keeps the first slot it wins, withdrawing the
other attempts (a slot won at the same moment is released at once).

Guarantees: at most ``max_leases`` holders, because each slot is a lock (kubecoord.api.Lock's
rules, per slot); a crashed holder's slot returns when its lease/session expires; the
token strictly increases per slot (on ZooKeeper czxids are global, so tokens are unique
across slots; on lease backends two slots may show the same number: (slot, token) is
unique). Tokens are not ordered across slots (N holders work at once): fence per slot,
``Fence(f"{name}-{slot}", token)``, the slot's lock record being the fencing domain. A
user passing a larger ``max_leases`` is refused while it holds a slot beyond
ours (acquire() reads slot ``max_leases`` first).

Not guaranteed: fairness (on ZooKeeper each slot is FIFO, the semaphore is not); kazoo's
Semaphore recipe (one lease node per holder under a lock) is a different layout and does
not exclude these slots.
"""

from __future__ import annotations

import threading
import time

from kubecoord import validation
from kubecoord.api import Coordinator, LockHolder, Semaphore
from kubecoord.errors import InvalidArgumentError, LockHeldError, LockNotHeldError
from kubecoord.locking.lock import ElectionLock, check_lock_name, one_attempt
from kubecoord.running.identity import default_id
from kubecoord.wire.events import Primitive

MAX_LEASES = 100
"""A waiter runs a thread and an election handle per slot: keep N small."""


def slot_record(name: str, slot: int) -> str:
    """The lock record of ``slot``: ``NAME-SLOT`` (a DNS-1123 label, checked)."""
    return validation.check_name(f"{name}-{slot}", "semaphore slot record name")


class SlotSemaphore(Semaphore):
    def __init__(
        self,
        coordinator: Coordinator,
        name: str,
        max_leases: int,
        *,
        holder_id: str | None = None,
        data: str = "",
    ) -> None:
        self.name = check_lock_name(name, Primitive.SEMAPHORE)
        if isinstance(max_leases, bool) or not isinstance(max_leases, int) or not 1 <= max_leases <= MAX_LEASES:
            raise InvalidArgumentError(f"max_leases must be an int from 1 to {MAX_LEASES}, got {max_leases!r}")
        self.max_leases = max_leases
        self.id = validation.check_id(holder_id, "id") if holder_id is not None else default_id()
        self._coordinator = coordinator
        self._beyond = slot_record(name, max_leases)
        self._slots = [
            ElectionLock(
                coordinator,
                name,
                holder_id=self.id,
                data=data,
                record=slot_record(name, i),
                slot=i,
                primitive=Primitive.SEMAPHORE,
            )
            for i in range(max_leases)
        ]
        self._attempt = threading.Lock()

    def acquire(
        self, timeout: float | None = None, blocking: bool = True, *, cancel: threading.Event | None = None
    ) -> bool:
        return one_attempt(self._attempt, timeout, lambda deadline: self._acquire(deadline, blocking, cancel))

    def _acquire(self, deadline: float | None, blocking: bool, cancel: threading.Event | None) -> bool:
        if self.is_held():
            raise LockHeldError(f"semaphore {self.name!r} is already held by this object ({self.id!r})")
        self._check_count()
        for slot in self._slots:
            if slot.acquire(blocking=False):
                return True
        if not blocking:
            return False
        return self._wait_for_any(deadline, cancel)

    def _check_count(self) -> None:
        with self._coordinator.leader_election(self._beyond) as beyond:
            holder = beyond.get_leader()
        if holder is not None:
            raise InvalidArgumentError(
                f"semaphore {self.name!r}: slot {self.max_leases} is held by {holder.id!r}, so some user passes "
                f"a max_leases larger than {self.max_leases}; every user must pass the same"
            )

    def _wait_for_any(self, deadline: float | None, cancel: threading.Event | None) -> bool:
        done = threading.Event()
        errors: list[BaseException] = []

        def attempt(slot: ElectionLock) -> None:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                if slot.acquire(remaining, cancel=done):
                    done.set()
            except BaseException as exc:  # handed to the caller below
                errors.append(exc)
                done.set()

        threads = [
            threading.Thread(target=attempt, args=(slot,), name=f"kubecoord-semaphore-{self.name}-{i}", daemon=True)
            for i, slot in enumerate(self._slots)
        ]
        for thread in threads:
            thread.start()
        while not done.wait(0.05):
            if (cancel is not None and cancel.is_set()) or (deadline is not None and time.monotonic() >= deadline):
                done.set()
        for thread in threads:
            thread.join()
        won = [slot for slot in self._slots if slot.is_held()]
        for extra in won[1:]:
            extra.release()  # won at the same moment as the first: hand it back at once
        if errors and not won:
            raise errors[0]
        return bool(won)

    def release(self) -> None:
        for slot in self._slots:
            if slot.is_held():
                slot.release()
                return
        raise LockNotHeldError(f"semaphore {self.name!r}: {self.id!r} holds no slot")

    def is_held(self) -> bool:
        return any(slot.is_held() for slot in self._slots)

    def held_until(self) -> float | None:
        for slot in self._slots:
            until = slot.held_until()
            if until is not None:
                return until
        return None

    @property
    def token(self) -> int | None:
        for slot in self._slots:
            token = slot.token
            if token is not None:
                return token
        return None

    @property
    def slot(self) -> int | None:
        for index, slot in enumerate(self._slots):
            if slot.is_held():
                return index
        return None

    def holders(self) -> list[LockHolder]:
        return [holder for slot in self._slots for holder in slot.holders()]

    def close(self) -> None:
        for slot in self._slots:
            slot.close()
