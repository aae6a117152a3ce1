"""What the elector needs from a backend: one record with compare-and-set, and a watch.

Implementations: the Kubernetes Lease store (backends/kubernetes/lease_store.py) and the
memory backend's in-process record table (backends/memory/records.py).
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
