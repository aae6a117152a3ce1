"""The election's record store for the lease core: the seed plugin's ``leader_election`` row
(TTL'd) and a ``leader_epochs`` row (never expiring), written only by LWT.

Layout (one election = one ``resource``)::

    leader_election (resource text PRIMARY KEY, owner text, sup_data text,   -- the seed's
                     tenure uuid, epoch bigint, nonce uuid)                   -- ours, TTL'd too
                     WITH default_time_to_live = 2                            -- the seed's
    leader_epochs   (resource text PRIMARY KEY, epoch bigint, tenure uuid)    -- no TTL

The holder row says who leads, for seed peers and kubecoord candidates alike: everything
in it carries a TTL (the seed's default 2 s for the seed's writes; ``lease_duration`` for
ours), so it vanishes when its holder stops renewing, and a seed peer's ``INSERT ... IF NOT
EXISTS`` then applies. The fencing epoch cannot live only in that row: a cell that never
expires would keep the row alive forever and lock every seed peer out. It lives in its own
partition of ``leader_epochs``, written ``USING TTL 0``, and a kubecoord candidate takes
over in three steps:

1. ``INSERT`` the holder row ``IF NOT EXISTS`` with a fresh token (column ``tenure``:
   ``token`` is a reserved word in CQL) and no epoch yet, ``USING TTL``;
2. as the row's holder, bump the epoch row by LWT (``IF epoch = E``, E as read; ``IF NOT
   EXISTS`` for the first term) to E+1;
3. write E+1 into the holder row ``IF tenure = ours``; only then does it lead.

Only holders bump the epoch, one holder at a time: a holder bumps while its row lives (its
renew deadline, counted from before step 1, ends before the row can expire), and the next
holder's row can only be inserted after that row is gone, so every term's epoch is higher
than the one before, after expiry too. A row with a tenure and no epoch (steps 1-3 in
flight, or a candidate that died in between: it expires) reads as held by nobody.

Renewals (``UPDATE ... USING TTL ... IF tenure = ? AND epoch = ?``) and the release
(``DELETE ... IF tenure = ? AND epoch = ?``) are conditional on the tenure (token, epoch),
never on the owner name alone. A renewal is only ever sent for the term being renewed (the
record the elector writes carries that term's epoch): a candidate that lost its term and
acquires again goes through steps 1-3, even over its own row still alive, and so leads
again only under a higher epoch. A seed peer's term has no epoch of its own: observers report
the epoch row's value (the last kubecoord term's) during it. Epochs increase strictly
across kubecoord terms (by one, unless a holder died between steps 2 and 3).

Versions (what the elector compares): our row: its nonce (new on every write); a seed
peer's row: writetime(owner) (changes on every renewal); no holder row: the epoch row's
(epoch, token). Followers read both rows every poll period (``poll``: QUORUM); decisions
after a conflict read at SERIAL (``refresh``). Every LWT's unknown outcome is resolved by
a SERIAL read of the row it wrote (session.Session.cas); a renewal that did not land is
retried (BackendUnavailableError), not taken for a lost election: the row is likely still ours.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any

from kubecoord._core.lease import LeaderRecord, Observation, RecordConflict
from kubecoord._internal.clock import Clock
from kubecoord.backends.cassandra.session import Session
from kubecoord.errors import BackendUnavailableError

_READ_HOLDER = (
    "SELECT owner, sup_data, tenure, epoch, nonce, writetime(owner) AS written FROM {ks}.leader_election "
    "WHERE resource = ?"
)
_READ_EPOCH = "SELECT epoch, tenure FROM {ks}.leader_epochs WHERE resource = ?"
_FIRST_EPOCH = "INSERT INTO {ks}.leader_epochs (resource, epoch, tenure) VALUES (?, ?, ?) IF NOT EXISTS USING TTL 0"
_NEXT_EPOCH = "UPDATE {ks}.leader_epochs USING TTL 0 SET epoch = ?, tenure = ? WHERE resource = ? IF epoch = ?"
_INSERT_HOLDER = (
    "INSERT INTO {ks}.leader_election (resource, owner, sup_data, tenure, nonce) VALUES (?, ?, ?, ?, ?) "
    "IF NOT EXISTS USING TTL ?"
)
_SET_EPOCH = (
    "UPDATE {ks}.leader_election USING TTL ? SET owner = ?, sup_data = ?, nonce = ?, tenure = ?, epoch = ? "
    "WHERE resource = ? IF tenure = ?"
)
# Every cell again, tenure and epoch too: each carries its own TTL, and one left to expire
# would turn the row into a seed peer's in every reader's eyes.
_RENEW = (
    "UPDATE {ks}.leader_election USING TTL ? SET owner = ?, sup_data = ?, nonce = ?, tenure = ?, epoch = ? "
    "WHERE resource = ? IF tenure = ? AND epoch = ?"
)
_RELEASE = "DELETE FROM {ks}.leader_election WHERE resource = ? IF tenure = ? AND epoch = ?"


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
        self._writes = 0
        """Counts this handle's own writes: a read that began before one of them is older
        than what that write told us, and must not replace it (a poll racing an acquire
        would otherwise show the leader somebody else's version, and it would step down)."""

    # -- reading ----------------------------------------------------------------------
    def observed(self) -> Observation | None:
        with self._lock:
            return self._observation

    def refresh(self, timeout: float) -> Observation | None:
        with self._lock:
            writes = self._writes
        return self._observe(self._read(serial=True, timeout=timeout), writes)

    def poll(self) -> bool:
        """Read both rows (QUORUM); True if the version changed since the last observation."""
        with self._lock:
            before = self._observation.version if self._observation else None
            writes = self._writes
        after = self._observe(self._read(serial=False, timeout=None), writes)
        return (after.version if after else None) != before

    def _read(self, *, serial: bool, timeout: float | None) -> Rows:
        holders = self._session.execute(_READ_HOLDER, [self._resource], serial=serial, timeout=timeout)
        holder = holders[0] if holders else None
        if holder is not None and holder.tenure is not None and holder.epoch is not None:
            return Rows(holder, None, None)  # a kubecoord holder's row carries its epoch: one read
        epochs = self._session.execute(_READ_EPOCH, [self._resource], serial=serial, timeout=timeout)
        epoch = epochs[0] if epochs else None
        return Rows(holder, epoch.epoch if epoch else None, epoch.tenure if epoch else None)

    def _observe(self, rows: Rows, writes: int) -> Observation | None:
        record, version = self._record_of(rows)
        with self._lock:
            if writes != self._writes:
                return self._observation  # we wrote since this read began: ours is newer
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
        if holder.tenure is not None:
            # A kubecoord candidate between its insert and its epoch: nobody leads yet.
            return self._record("", "", rows.epoch or 0), f"a:{holder.nonce}"
        # A seed peer's row: no epoch of its own; the last kubecoord term's stands for it.
        return self._record(holder.owner or "", holder.sup_data or "", rows.epoch or 0), f"s:{holder.written}"

    def _record(self, holder: str, data: str, epoch: int) -> LeaderRecord:
        return LeaderRecord(
            holder=holder, lease_duration_seconds=self._ttl, acquire_time=None, renew_time=None,
            transitions=epoch, data=data,
        )

    # -- writing (the RecordStore protocol) ---------------------------------------------
    def read_mark(self, timeout: float) -> tuple[int, str | None]:
        """The ``leader_epochs`` row is this store's high-water mark, and every acquisition
        bumps it by LWT above what it holds (``_bump_epoch``): no second mark to keep."""
        return 0, None

    def write_mark(self, epoch: int, version: str | None, timeout: float) -> str | None:
        return None

    def create(self, record: LeaderRecord, timeout: float) -> Observation:
        return self._acquire(record, timeout)

    def update(self, record: LeaderRecord, version: str, timeout: float) -> Observation:
        with self._lock:
            tenure = self._tenures.get(record.holder) if record.holder else None
        if not record.holder:
            return self._release(version, timeout)
        if tenure is not None and version == tenure.version and record.transitions == tenure.epoch:
            return self._renew(record, tenure, timeout)
        # An acquisition: a new term, above every epoch its elector saw. Over a row still
        # at the candidate's own last version (a term it lost by its renew deadline, the row
        # kept alive by a renewal whose answer was lost), it must wait for that row to go,
        # not renew it: the new term would carry the lost term's epoch.
        return self._acquire(record, timeout)

    def _acquire(self, record: LeaderRecord, timeout: float) -> Observation:
        token = uuid.uuid4()
        # 1. Take the holder row if nobody holds it (no epoch yet: it reads as held by nobody).
        nonce = uuid.uuid4()
        inserted = self._session.cas(
            _INSERT_HOLDER, [self._resource, record.holder, record.data, token, nonce, self._ttl],
            resolve=lambda: self._holder_nonce_is(nonce), timeout=timeout,
        )
        if not inserted.applied:
            raise RecordConflict("the election is held")
        # 2. As its holder, bump the epoch (nobody else may: only holders bump).
        epoch = self._bump_epoch(record.transitions, token, timeout)
        # 3. The epoch into our row; from here on we lead.
        nonce = uuid.uuid4()
        stamped = self._session.cas(
            _SET_EPOCH, [self._ttl, record.holder, record.data, nonce, token, epoch, self._resource, token],
            resolve=lambda: self._holder_nonce_is(nonce), timeout=timeout,
        )
        if not stamped.applied:
            raise RecordConflict("our holder row vanished before it got its epoch")
        return self._written(record, token, epoch, nonce)

    def _bump_epoch(self, wanted: int, token: uuid.UUID, timeout: float) -> int:
        """Raise the epoch row from what it holds to at least ``wanted`` (the elector's highest
        epoch seen + 1); the new epoch."""
        with self._lock:
            current = self._epoch_seen
        for _ in range(3):
            epoch = max(wanted, (current or 0) + 1)
            if current is None:
                result = self._session.cas(
                    _FIRST_EPOCH, [self._resource, epoch, token],
                    resolve=lambda e=epoch: self._epoch_is(e, token),  # type: ignore[misc]
                    timeout=timeout,
                )
            else:
                result = self._session.cas(
                    _NEXT_EPOCH, [epoch, token, self._resource, current],
                    resolve=lambda e=epoch: self._epoch_is(e, token),  # type: ignore[misc]
                    timeout=timeout,
                )
            if result.applied:
                with self._lock:
                    self._epoch_seen = epoch
                return epoch
            # Our view of the epoch row was stale: the answer says what it holds.
            current = (result.existing or {}).get("epoch")
            if current is None:
                rows = self._session.execute(_READ_EPOCH, [self._resource], serial=True, timeout=timeout)
                current = rows[0].epoch if rows else None
        raise RecordConflict("the epoch row kept changing")

    def _renew(self, record: LeaderRecord, tenure: Tenure, timeout: float) -> Observation:
        nonce = uuid.uuid4()
        renewed = self._session.cas(
            _RENEW,
            [self._ttl, record.holder, record.data, nonce, tenure.token, tenure.epoch, self._resource, tenure.token,
             tenure.epoch],
            resolve=lambda: self._holder_nonce_is(nonce), timeout=timeout,
        )
        if not renewed.applied and renewed.existing is None:
            # An unknown outcome (a CAS timeout under contention) that did not land: the row
            # may well still be ours, so keep the tenure and let the elector retry within its
            # renew deadline. Dropping it would make our own live row look like a rival's.
            raise BackendUnavailableError("the renewal's outcome was unknown, and it did not land")
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
            self._writes += 1
        return observation

    def forget(self, candidate: str) -> None:
        """A candidate was withdrawn without a release (a crash): its term is not ours to end."""
        with self._lock:
            self._tenures.pop(candidate, None)

    def _written(self, record: LeaderRecord, token: uuid.UUID, epoch: int, nonce: uuid.UUID) -> Observation:
        version = f"k:{nonce}"
        observation = Observation(record._replace(transitions=epoch, lease_duration_seconds=self._ttl), version,
                                  self._clock.now())
        with self._lock:
            self._tenures[record.holder] = Tenure(token, epoch, version)
            self._observation = observation
            self._writes += 1
        return observation

    # -- resolving unknown outcomes (SERIAL reads) ---------------------------------------
    def _epoch_is(self, epoch: int, token: uuid.UUID) -> bool:
        rows = self._session.execute(_READ_EPOCH, [self._resource], serial=True)
        return bool(rows) and rows[0].epoch == epoch and rows[0].tenure == token

    def _holder_nonce_is(self, nonce: uuid.UUID) -> bool:
        rows = self._session.execute(_READ_HOLDER, [self._resource], serial=True)
        return bool(rows) and rows[0].nonce == nonce
