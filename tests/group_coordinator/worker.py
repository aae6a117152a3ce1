"""A group member that "works" on its units, reporting what it does as it does it.

Used in-process (memory backend, threads) and by member_process.py (one process per
member). Every report is a dict with ``t`` (wall seconds, one machine's clock):

    assigned  {gen, units, t}     on_assigned, stamped before the member starts on them
    revoked   {units, t}          on_revoked/on_lost, stamped after work on them stopped
    work      {gen, units, t}     a work tick that passed ensure_generation(gen)
    fenced    {gen, error, t}     a work tick that ensure_generation refused

Work ticks and the callbacks share one lock, as real work must finish before a
revocation returns; so each report falls inside the member's own intervals, and the
check is across members (tests/group_coordinator/checks.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import kubecoord
from kubecoord.group_coordinator import UnitsProtocol

Report = Callable[[dict[str, Any]], None]


class Worker:
    def __init__(
        self,
        coordinator: kubecoord.Coordinator,
        group: str,
        member_id: str,
        units: list[str],
        report: Report,
        *,
        assignors: list[str],
        session_timeout: float,
        rebalance_timeout: float = 20.0,
        tick: float = 0.05,
    ) -> None:
        self.coordinator = coordinator
        self.member_id = member_id
        self._report = report
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._tick = tick
        self.protocol = UnitsProtocol(
            units, assignors=assignors, on_assigned=self._assigned, on_revoked=self._revoked, on_lost=self._revoked
        )
        self.member = coordinator.group_coordinator(
            group, self.protocol, member_id=member_id, session_timeout=session_timeout,
            rebalance_timeout=rebalance_timeout,
        )
        self._thread = threading.Thread(target=self._work, name=f"work-{member_id}", daemon=True)

    def start(self) -> None:
        self.member.join()
        self._thread.start()

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.member.leave()

    def halt(self) -> None:
        """Stop working without leaving (the process is about to die)."""
        self._stop.set()

    def _emit(self, event: str, **fields: Any) -> None:
        self._report({"e": event, "member": self.member_id, **fields, "t": time.time()})

    def _assigned(self, units: list[str]) -> None:
        with self._lock:
            self._emit("assigned", gen=self.protocol.generation, units=units)

    def _revoked(self, units: list[str]) -> None:
        with self._lock:
            self._emit("revoked", units=units)

    def _work(self) -> None:
        while not self._stop.wait(self._tick):
            with self._lock:
                generation = self.member.generation
                units = self.protocol.owned
                if not units:
                    continue
                try:
                    self.member.ensure_generation(generation)
                except kubecoord.CoordinationError as exc:
                    self._emit("fenced", gen=generation, error=type(exc).__name__)
                    continue
                self._emit("work", gen=generation, units=units)
