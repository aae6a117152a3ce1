"""The election's record store for the lease core: the seed plugin's ``leader_election`` row
(TTL'd) and a ``leader_epochs`` row (never expiring), written only by LWT.

Layout (one election = one ``resource``)::

    leader_election (resource text PRIMARY KEY, owner text, sup_data text,   -- the seed's
                     tenure uuid, epoch bigint, nonce uuid)                   -- ours, TTL'd too
                     WITH default_time_to_live = 2                            -- the seed's
    leader_epochs   (resource text PRIMARY KEY, epoch bigint, tenure uuid)    -- no TTL

The holder row says who leads, for seed peers and kubecoord candidates alike: everything
in it carries a TTL (the seed's default 2 s for the seed's writes; ``session_timeout`` for
ours), so it vanishes when its holder stops renewing, and a seed peer's ``INSERT ... IF NOT
EXISTS`` then applies. The fencing epoch cannot live in that row: a cell that never
expires would keep the row alive forever and lock every seed peer out. It lives in its own
partition of ``leader_epochs``, written ``USING TTL 0``, and a kubecoord candidate takes
over in three steps:

1. reserve epoch E+1 by LWT on the epoch row (``IF epoch = E``, E as read; or ``IF NOT
   EXISTS`` for the first term) with a fresh token (column ``tenure``: ``token`` is a
   reserved word in CQL);
2. ``INSERT`` the holder row ``IF NOT EXISTS`` with that token and epoch, ``USING TTL``;
3. read the epoch row at SERIAL: if somebody reserved a later epoch meanwhile (a
   candidate that may have led with it already), delete the row ``IF tenure = ours`` and
   give up (RecordConflict) — so the epochs of successive kubecoord terms strictly increase.

Renewals (``UPDATE ... USING TTL ... IF tenure = ? AND epoch = ?``) and the release
(``DELETE ... IF tenure = ? AND epoch = ?``) are conditional on the tenure (token, epoch),
never on the owner name alone. A seed peer's term has no epoch of its own: observers report
the epoch row's value (the last kubecoord term's) during it. Failed takeovers burn an
epoch number: epochs increase strictly, not by exactly one.

Versions (what the elector compares): our row: its nonce (new on every write); a seed
peer's row: writetime(owner) (changes on every renewal); no holder row: the epoch row's
(epoch, token). Followers read both rows every poll period (``poll``: QUORUM); decisions
after a conflict read at SERIAL (``refresh``). Every LWT's unknown outcome is resolved by
a SERIAL read of the row it wrote (session.Session.cas).
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, replace
from typing import Any

from kubecoord._core.lease import LeaderRecord, Observation, RecordConflict
from kubecoord._internal.clock import Clock
from kubecoord.backends.cassandra.session import Session

_READ_HOLDER = (
    "SELECT owner, sup_data, tenure, epoch, nonce, writetime(owner) AS written FROM leader_election WHERE resource = ?"
)
_READ_EPOCH = "SELECT epoch, tenure FROM leader_epochs WHERE resource = ?"
_FIRST_EPOCH = "INSERT INTO leader_epochs (resource, epoch, tenure) VALUES (?, ?, ?) IF NOT EXISTS USING TTL 0"
_NEXT_EPOCH = "UPDATE leader_epochs USING TTL 0 SET epoch = ?, tenure = ? WHERE resource = ? IF epoch = ?"
_INSERT_HOLDER = (
    "INSERT INTO leader_election (resource, owner, sup_data, tenure, epoch, nonce) VALUES (?, ?, ?, ?, ?, ?) "
    "IF NOT EXISTS USING TTL ?"
)
_RENEW = (
    "UPDATE leader_election USING TTL ? SET owner = ?, sup_data = ?, nonce = ? WHERE resource = ? "
    "IF tenure = ? AND epoch = ?"
)
_RELEASE = "DELETE FROM leader_election WHERE resource = ? IF tenure = ? AND epoch = ?"


@dataclass(frozen=True, slots=True)
class Tenure:
    """One term of one of this handle's candidates: what its LWTs are conditional on."""

    token: uuid.UUID
    epoch: int
    version: str


@dataclass(frozen=True, slots=True)
class Rows:
    holder: Any | None
    epoch: int | None
    epoch_token: uuid.UUID | None


class ElectionRows:
    """The two rows of one election as one handle sees them; a RecordStore for its electors."""

    def __init__(self, session: Session, resource: str, *, ttl: int, clock: Clock) -> None:
        self._session = session
        self._resource = resource
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._observation: Observation | None = None
        self._epoch_seen: int | None = None
        self._tenures: dict[str, Tenure] = {}

    # -- reading ----------------------------------------------------------------------
    def observed(self) -> Observation | None:
        with self._lock:
            return self._observation

    def refresh(self, timeout: float) -> Observation | None:
        return self._observe(self._read(serial=True, timeout=timeout))

    def poll(self) -> bool:
        """Read both rows (QUORUM); True if the version changed since the last observation."""
        with self._lock:
            before = self._observation.version if self._observation else None
        after = self._observe(self._read(serial=False, timeout=None))
        return (after.version if after else None) != before

    def _read(self, *, serial: bool, timeout: float | None) -> Rows:
        holders = self._session.execute(_READ_HOLDER, [self._resource], serial=serial, timeout=timeout)
        holder = holders[0] if holders else None
        if holder is not None and holder.tenure is not None and holder.epoch is not None:
            return Rows(holder, None, None)  # our row carries its epoch: one read
        epochs = self._session.execute(_READ_EPOCH, [self._resource], serial=serial, timeout=timeout)
        epoch = epochs[0] if epochs else None
        return Rows(holder, epoch.epoch if epoch else None, epoch.tenure if epoch else None)

    def _observe(self, rows: Rows) -> Observation | None:
        record, version = self._record_of(rows)
        with self._lock:
            if rows.epoch is not None:
                self._epoch_seen = rows.epoch
            elif record is not None and rows.holder is not None and rows.holder.tenure is not None:
                self._epoch_seen = max(self._epoch_seen or 0, record.transitions)
            if record is None:
                self._observation = None
            elif self._observation is None or self._observation.version != version:
                self._observation = Observation(record, version, self._clock.now())
            return self._observation

    def _record_of(self, rows: Rows) -> tuple[LeaderRecord | None, str]:
        holder = rows.holder
        if holder is None:
            if rows.epoch is None:
                return None, ""
            return self._record("", "", rows.epoch), f"e:{rows.epoch}:{rows.epoch_token}"
        if holder.tenure is not None and holder.epoch is not None:
            return self._record(holder.owner or "", holder.sup_data or "", holder.epoch), f"k:{holder.nonce}"
        # A seed peer's row: no epoch of its own; the last kubecoord term's stands for it.
        return self._record(holder.owner or "", holder.sup_data or "", rows.epoch or 0), f"s:{holder.written}"

    def _record(self, holder: str, data: str, epoch: int) -> LeaderRecord:
        return LeaderRecord(
            holder=holder, lease_duration_seconds=self._ttl, acquire_time=None, renew_time=None,
            transitions=epoch, data=data,
        )

    # -- writing (the RecordStore protocol) ---------------------------------------------
    def create(self, record: LeaderRecord, timeout: float) -> Observation:
        return self._acquire(record, timeout)

    def update(self, record: LeaderRecord, version: str, timeout: float) -> Observation:
        with self._lock:
            tenure = self._tenures.get(record.holder) if record.holder else None
        if not record.holder:
            return self._release(version, timeout)
        if tenure is not None and version == tenure.version:
            return self._renew(record, tenure, timeout)
        return self._acquire(record, timeout)

    def _acquire(self, record: LeaderRecord, timeout: float) -> Observation:
        with self._lock:
            seen = self._epoch_seen
        token = uuid.uuid4()
        epoch = max(record.transitions, (seen or 0) + 1)
        # 1. Reserve the epoch.
        if seen is None:
            reserved = self._session.cas(
                _FIRST_EPOCH, [self._resource, epoch, token], resolve=lambda: self._epoch_is(epoch, token),
                timeout=timeout,
            )
        else:
            reserved = self._session.cas(
                _NEXT_EPOCH, [epoch, token, self._resource, seen], resolve=lambda: self._epoch_is(epoch, token),
                timeout=timeout,
            )
        if not reserved.applied:
            if reserved.existing is not None and reserved.existing.get("epoch") is not None:
                with self._lock:
                    self._epoch_seen = max(self._epoch_seen or 0, reserved.existing["epoch"])
            raise RecordConflict("another candidate reserved the next epoch")
        with self._lock:
            self._epoch_seen = epoch
        # 2. Take the holder row if nobody holds it.
        nonce = uuid.uuid4()
        inserted = self._session.cas(
            _INSERT_HOLDER, [self._resource, record.holder, record.data, token, epoch, nonce, self._ttl],
            resolve=lambda: self._holder_nonce_is(nonce), timeout=timeout,
        )
        if not inserted.applied:
            raise RecordConflict("the election is held")
        # 3. Nobody reserved a later epoch meanwhile (they might have led with it before us).
        if not self._epoch_is(epoch, token):
            self._session.cas(_RELEASE, [self._resource, token, epoch], resolve=lambda: True, timeout=timeout)
            raise RecordConflict("a later epoch was reserved while we took the election")
        return self._written(record, token, epoch, nonce)

    def _renew(self, record: LeaderRecord, tenure: Tenure, timeout: float) -> Observation:
        nonce = uuid.uuid4()
        renewed = self._session.cas(
            _RENEW, [self._ttl, record.holder, record.data, nonce, self._resource, tenure.token, tenure.epoch],
            resolve=lambda: self._holder_nonce_is(nonce), timeout=timeout,
        )
        if not renewed.applied:
            with self._lock:
                self._tenures.pop(record.holder, None)
            raise RecordConflict("the election is no longer ours")
        return self._written(record, tenure.token, tenure.epoch, nonce)

    def _release(self, version: str, timeout: float) -> Observation:
        with self._lock:
            mine = [(candidate, t) for candidate, t in self._tenures.items() if t.version == version]
        if not mine:
            raise RecordConflict("the election changed since it was ours")
        candidate, tenure = mine[0]
        with self._lock:
            self._tenures.pop(candidate, None)
        released = self._session.cas(
            _RELEASE, [self._resource, tenure.token, tenure.epoch], resolve=lambda: True, timeout=timeout
        )
        if not released.applied:
            raise RecordConflict("the election was no longer ours")
        record = self._record("", "", tenure.epoch)
        observation = Observation(record, f"e:{tenure.epoch}:released", self._clock.now())
        with self._lock:
            self._observation = observation
        return observation

    def forget(self, candidate: str) -> None:
        """A candidate was withdrawn without a release (a crash): its term is not ours to end."""
        with self._lock:
            self._tenures.pop(candidate, None)

    def _written(self, record: LeaderRecord, token: uuid.UUID, epoch: int, nonce: uuid.UUID) -> Observation:
        version = f"k:{nonce}"
        observation = Observation(replace(record, transitions=epoch, lease_duration_seconds=self._ttl), version,
                                  self._clock.now())
        with self._lock:
            self._tenures[record.holder] = Tenure(token, epoch, version)
            self._observation = observation
        return observation

    # -- resolving unknown outcomes (SERIAL reads) ---------------------------------------
    def _epoch_is(self, epoch: int, token: uuid.UUID) -> bool:
        rows = self._session.execute(_READ_EPOCH, [self._resource], serial=True)
        return bool(rows) and rows[0].epoch == epoch and rows[0].tenure == token

    def _holder_nonce_is(self, nonce: uuid.UUID) -> bool:
        rows = self._session.execute(_READ_HOLDER, [self._resource], serial=True)
        return bool(rows) and rows[0].nonce == nonce
