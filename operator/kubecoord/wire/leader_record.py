"""The election record, an observation of it, and the one expiry rule.

A record is client-go's LeaderElectionRecord plus the holder's data; how it is stored
is the store's business (a Lease on Kubernetes, kubecoord.wire.lease; an in-process
table on memory://).

The expiry rule, used for elections and group members alike: a held record expires
``lease_duration_seconds`` after the moment this process observed its current version,
on this process's monotonic clock — never by comparing renewTime with the local wall
clock (another machine's clock may be skewed).
"""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

# NamedTuples rather than dataclasses: this module is on the ``kubecoord`` command's
# start-up path, and ``dataclasses`` imports ``inspect`` (about 10 ms).


class LeaderRecord(NamedTuple):
    """client-go's LeaderElectionRecord, plus the holder's data (``record._replace(...)``
    makes a changed copy)."""

    holder: str
    lease_duration_seconds: float
    acquire_time: dt.datetime | None
    renew_time: dt.datetime | None
    transitions: int
    data: str = ""

    @property
    def held(self) -> bool:
        return bool(self.holder)


class Observation(NamedTuple):
    """A record version as this process observed it (seen_at: local monotonic time)."""

    record: LeaderRecord
    version: str
    seen_at: float


def expires_at(observation: Observation) -> float:
    """When ``observation``'s record expires in this process's view (the one expiry rule)."""
    return observation.seen_at + observation.record.lease_duration_seconds


def from_unix(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def released(record: LeaderRecord, now: dt.datetime) -> LeaderRecord:
    """What a release writes, as client-go's release does: no holder, 1 s, transitions kept."""
    return LeaderRecord(
        holder="", lease_duration_seconds=1, acquire_time=now, renew_time=now, transitions=record.transitions
    )


def is_release(record: LeaderRecord) -> bool:
    """Whether ``record`` has a release's shape (``released``, client-go's release): no
    holder, 1 s, acquireTime and renewTime the same instant. A holderIdentity cleared by
    hand keeps its holder's duration and times; a Lease created from a manifest has none."""
    return (
        not record.held and record.lease_duration_seconds == 1
        and record.acquire_time is not None and record.acquire_time == record.renew_time
    )
