"""Resolving a KV write whose answer was lost, by reading, never by sending it again.

Every KV write transaction carries a *marker*: its compares include "the marker key
``_kubecoord/writes/<lease hex>/<seq>`` is absent" and its success branch puts that key
("applied", on the coordinator's lease). When the answer is lost, the writer sends an
*abort*: put the marker ("aborted") if it is absent. Exactly one of the two transactions
creates the marker, and etcd applies transactions one at a time, so:

- the abort succeeds: the write's compare can never hold again; it was not applied
  (a plain BackendUnavailableError says so);
- the marker reads "applied": the write was applied, at the marker's revision (the
  key's version is read at that revision);
- nothing answers, or the write's lease ended meanwhile (its markers went with it):
  OutcomeUnknownError. The abort is put on the lease the write's marker names, never
  on a newer one: etcd refuses it once that lease is gone, so a marker that went with its
  lease is never taken for a write that did not happen.

Markers of answered writes are deleted by later writes of the same coordinator (in
their transactions, no extra request); aborted markers stay until the lease ends, so a
write still in flight somewhere in the cluster can never apply after its abort.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any

from kubecoord.backends.etcd import txn
from kubecoord.backends.etcd.context import EtcdContext
from kubecoord.backends.etcd.transport import GatewayError
from kubecoord.errors import BackendUnavailableError, CoordinationError, OutcomeUnknownError

APPLIED = "applied"
ABORTED = "aborted"
CLEANUP_PER_WRITE = 16


@dataclass(frozen=True, slots=True)
class Marker:
    """One write's marker key and the lease it is put on."""

    key: str
    lease: int


class WriteMarkers:
    """The markers of one coordinator's writes."""

    def __init__(self, context: EtcdContext) -> None:
        self._context = context
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._answered: list[str] = []

    def new(self) -> Marker:
        session = self._context.session
        lease = session.lease_id
        return Marker(self._context.internal("writes", format(lease, "x"), f"{next(self._numbers):016x}"), lease)

    def operations(self, marker: Marker) -> list[dict[str, Any]]:
        """The success branch's part: put ``marker``, delete some answered writes' markers."""
        with self._lock:
            done, self._answered = self._answered[:CLEANUP_PER_WRITE], self._answered[CLEANUP_PER_WRITE:]
        return [txn.put(marker.key, APPLIED, lease=marker.lease), *(txn.delete(m) for m in done)]

    def answered(self, marker: Marker) -> None:
        """``marker``'s write was answered (and applied): its marker may go."""
        with self._lock:
            self._answered.append(marker.key)

    def resolve(self, marker: Marker, what: str) -> int:
        """After a lost answer: the revision at which the write was applied; raises
        BackendUnavailableError (not applied) or OutcomeUnknownError (cannot tell)."""
        try:
            answer = txn.run(self._context.transport, [txn.created(marker.key, 0)],
                             [txn.put(marker.key, ABORTED, lease=marker.lease)], [txn.get(marker.key)],
                             idempotent=True)
        except (CoordinationError, GatewayError) as exc:
            raise OutcomeUnknownError(
                f"etcd: {what}: the answer was lost and its outcome could not be read back ({exc})"
            ) from None
        if answer.succeeded:
            raise BackendUnavailableError(f"etcd: {what}: the answer was lost; it was not applied (now aborted)")
        found = answer.read(0)
        if found is None:
            raise OutcomeUnknownError(f"etcd: {what}: the answer was lost and its marker is gone with its lease")
        if found.value == ABORTED.encode():
            raise BackendUnavailableError(f"etcd: {what}: the answer was lost; it was not applied (aborted)")
        self.answered(marker)
        return found.mod_revision
