"""memory://'s election records: an in-process table with compare-and-set, and one
process's view of a record — the lease core's RecordStore for the memory backend.

RecordTable holds one record per name with an integer version; every write is a
compare-and-set on it (create only when absent, update only at the expected version),
as the API server does with a Lease's resourceVersion. Subscribers are told of every
write, outside the table's lock (that is the watch). Beside each record the table keeps
the high-water mark of the epochs issued on it (kubecoord._core.lease.store), with a
version of its own, also written only by compare-and-set.

TableView is what one process observed of one record, and when, on its own clock:
``deliver()`` is its watch (observe the current version; the first sight of a version
stamps seen_at), its own writes are observed as they succeed. The elector judges expiry
from these observations only (kubecoord.wire.leader_record.expires_at).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kubecoord._core.lease import LeaderRecord, Observation, RecordConflict
from kubecoord._internal.clock import Clock

Subscriber = Callable[[], None]


class RecordTable:
    """Records by name with compare-and-set writes. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, tuple[LeaderRecord, int]] = {}
        self._subscribers: dict[str, list[Subscriber]] = {}
        self._marks: dict[str, tuple[int, int]] = {}

    def read_mark(self, name: str) -> tuple[int, int] | None:
        """The high-water mark of ``name``'s epochs and its version, or None if never written."""
        with self._lock:
            return self._marks.get(name)

    def write_mark(self, name: str, epoch: int, expected: int | None) -> int:
        """Create (``expected`` None) or replace the mark at version ``expected``; the new
        version. RecordConflict otherwise."""
        with self._lock:
            current = self._marks.get(name)
            if (None if current is None else current[1]) != expected:
                raise RecordConflict(f"the epoch mark of {name!r} is not at version {expected}")
            version = (current[1] if current is not None else 0) + 1
            self._marks[name] = (epoch, version)
            return version

    def read(self, name: str) -> tuple[LeaderRecord, int] | None:
        """The record ``name`` and its version, or None if it was never written."""
        with self._lock:
            return self._records.get(name)

    def write(self, name: str, record: LeaderRecord, expected: int | None) -> int:
        """Create (``expected`` None) or replace at version ``expected``; the new version.

        RecordConflict when the record exists (create) or is at another version (update).
        """
        with self._lock:
            current = self._records.get(name)
            if expected is None and current is not None:
                raise RecordConflict(f"record {name!r} exists")
            if expected is not None and (current is None or current[1] != expected):
                raise RecordConflict(f"record {name!r} is not at version {expected}")
            version = (current[1] if current is not None else 0) + 1
            self._records[name] = (record, version)
            subscribers = list(self._subscribers.get(name, ()))
        for subscriber in subscribers:
            subscriber()
        return version

    def subscribe(self, name: str, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.setdefault(name, []).append(subscriber)

    def unsubscribe(self, name: str, subscriber: Subscriber) -> None:
        with self._lock:
            subscribers = self._subscribers.get(name, [])
            if subscriber in subscribers:
                subscribers.remove(subscriber)


class TableView:
    """kubecoord._core.lease.RecordStore over one record of a RecordTable, as one process sees it."""

    def __init__(self, table: RecordTable, name: str, clock: Clock) -> None:
        self._table = table
        self._name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: Observation | None = None

    def deliver(self) -> Observation | None:
        """Observe the table's current version (the watch); the latest observation."""
        current = self._table.read(self._name)
        if current is not None:
            self._observe(current[0], current[1])
        return self._seen

    def observed(self) -> Observation | None:
        return self._seen

    def refresh(self, timeout: float) -> Observation | None:
        return self.deliver()

    def create(self, record: LeaderRecord, timeout: float) -> Observation:
        return self._observe(record, self._table.write(self._name, record, None))

    def update(self, record: LeaderRecord, version: str, timeout: float) -> Observation:
        return self._observe(record, self._table.write(self._name, record, int(version)))

    def read_mark(self, timeout: float) -> tuple[int, str | None]:
        current = self._table.read_mark(self._name)
        return (0, None) if current is None else (current[0], str(current[1]))

    def write_mark(self, epoch: int, version: str | None, timeout: float) -> str | None:
        return str(self._table.write_mark(self._name, epoch, None if version is None else int(version)))

    def _observe(self, record: LeaderRecord, version: int) -> Observation:
        with self._lock:
            seen = self._seen
            # Versions only grow: a late delivery never replaces a newer observation, and a
            # version already seen keeps the moment it was first seen.
            if seen is None or int(seen.version) < version:
                self._seen = Observation(record, str(version), self._clock.now())
            assert self._seen is not None
            return self._seen
