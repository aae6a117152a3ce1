"""A ledger of who works on which unit, shared by the members of one test process.

Each member's UnitsProtocol callbacks write to it; it fails at once (inside the
callback, recorded in ``violations``) when a unit is given to a member while another
live member still holds it. A crashed member's units are released when the test says
the process died (``crashed``), as a real process stops working when it is killed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from kubecoord.group_coordinator import UnitsProtocol


class Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: dict[str, str] = {}
        self.violations: list[str] = []
        self.revoked: dict[str, list[str]] = {}
        self.assigned: dict[str, list[str]] = {}
        self.checks: dict[str, Callable[[str], None]] = {}

    def protocol(self, member: str, units: Sequence[str], **options: object) -> UnitsProtocol:
        def on_assigned(got: list[str]) -> None:
            with self._lock:
                for unit in got:
                    holder = self.owner.get(unit)
                    if holder is not None and holder != member:
                        self.violations.append(f"{unit} given to {member} while {holder} holds it")
                    self.owner[unit] = member
                self.assigned.setdefault(member, []).extend(got)
                checks = list(self.checks.values())
            for check in checks:
                check(member)

        def on_revoked(gone: list[str]) -> None:
            with self._lock:
                for unit in gone:
                    if self.owner.get(unit) == member:
                        del self.owner[unit]
                self.revoked.setdefault(member, []).extend(gone)

        return UnitsProtocol(units, on_assigned=on_assigned, on_revoked=on_revoked, **options)  # type: ignore[arg-type]

    def crashed(self, member: str) -> None:
        with self._lock:
            for unit in [u for u, m in self.owner.items() if m == member]:
                del self.owner[unit]

    def held_by(self, member: str) -> set[str]:
        with self._lock:
            return {u for u, m in self.owner.items() if m == member}

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self.owner)
