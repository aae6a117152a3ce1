"""The lease core: record, store protocol, elector, timings, loop.

- ``record``: LeaderRecord (client-go's LeaderElectionRecord plus the holder's data),
  Observation (a version as one process observed it) and the ONE expiry rule,
  ``expires_at(observation)``: the observed version plus its lease duration, on the
  observer's own monotonic clock.
- ``store``: the RecordStore protocol (observed, refresh, create, update with
  compare-and-set) and RecordConflict.
- ``elector``: one candidate's acquire/renew state machine over a RecordStore, with the
  backend's name and metrics passed in.
- ``timings``: lease_duration > renew_deadline > 1.2 x retry_period, checked at construction.
- ``loop``: Loop, which calls a step again after the delay it returns, on a scheduler the
  whole process shares (a few worker threads, not a thread per elector); a step that
  returns PARKED runs again only when woken.
"""

from kubecoord._core.lease.elector import Elector
from kubecoord._core.lease.loop import PARKED, Loop
from kubecoord._core.lease.store import RecordConflict, RecordStore
from kubecoord.timings import Timings
from kubecoord.wire.leader_record import LeaderRecord, Observation, expires_at, from_unix, released

__all__ = [
    "PARKED",
    "Elector",
    "LeaderRecord",
    "Loop",
    "Observation",
    "RecordConflict",
    "RecordStore",
    "Timings",
    "expires_at",
    "from_unix",
    "released",
]
