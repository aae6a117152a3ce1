"""What the elector needs from a backend: one record with compare-and-set, a watch, and
the high-water mark of the epochs issued on that record.

The mark is a second object beside the record (on Kubernetes the Lease ``NAME.epoch``),
written only by compare-and-set and only upwards: an elector raises it to an epoch before
it writes a record carrying that epoch (kubecoord._core.lease.elector), so a record edited
down, deleted or re-created by hand never makes an epoch issued again.

Implementations: the Kubernetes Lease store (backends/kubernetes/lease_store.py), the
memory backend's in-process record table (backends/memory/records.py) and Cassandra's
election rows (backends/cassandra/election_rows.py, whose epoch row is its mark).
"""

from __future__ import annotations

from typing import Protocol

from kubecoord.wire.leader_record import LeaderRecord, Observation


class RecordConflict(Exception):
    """The record changed (or appeared) since the version the write was based on."""


class RecordStore(Protocol):
    def observed(self) -> Observation | None:
        """The latest version observed (watch or own writes); None if there is no record."""

    def refresh(self, timeout: float) -> Observation | None:
        """Read the record from the server now and return the latest observation."""

    def create(self, record: LeaderRecord, timeout: float) -> Observation:
        """Create the record; RecordConflict if it exists."""

    def update(self, record: LeaderRecord, version: str, timeout: float) -> Observation:
        """Replace the record if still at ``version``; RecordConflict otherwise."""

    def read_mark(self, timeout: float) -> tuple[int, str | None]:
        """(the high-water mark, its version) read from the server now; (0, None) if there is
        no mark object."""

    def write_mark(self, epoch: int, version: str | None, timeout: float) -> str | None:
        """Set the mark to ``epoch`` if still at ``version`` (None: create it); its new version.
        RecordConflict if it changed (or appeared) since."""
