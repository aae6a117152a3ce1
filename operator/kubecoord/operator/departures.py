"""Why a group member went: it left (deleted its own live Lease) or it expired.

The operator watches member Leases (kubernetes backend) and remembers, per Lease, when it
last saw the Lease change — on its own monotonic clock, never by comparing the Lease's
renewTime with the local clock. When a member Lease is deleted, the member *expired* if
nobody renewed it for a whole lease duration before the deletion (an observer reaped
it: the operator or any client's membership handle), and *left* otherwise (a
member's leave() deletes a Lease it renewed moments ago).

Guarantees: ``verdict`` waits (up to its timeout) for the deletion to be seen, because
the Lease watch and the membership listener race; without a verdict the answer is
"left". Not guaranteed: a verdict for Leases deleted while the operator was down.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from kubecoord.wire import object_names
from kubecoord.wire.leader_record import Observation, expires_at
from kubecoord.wire.lease import record_from_lease

_REMEMBERED = 10_000
_SLACK = 0.5
"""Seconds of slack: an observer reaps once the lease duration has passed in its own
view, which can be a little earlier than in ours."""


class Departures:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._seen: dict[tuple[str, str], Observation] = {}
        """(namespace, lease name) -> the Lease's last change as observed here (monotonic clock)."""
        self._verdicts: OrderedDict[tuple[str, str, str], bool] = OrderedDict()

    def observe(self, event_type: str | None, lease: dict[str, Any]) -> None:
        """Feed one watch event (ADDED, MODIFIED, DELETED or None for a listing) of a member Lease."""
        metadata = lease.get("metadata") or {}
        key = (str(metadata.get("namespace")), str(metadata.get("name")))
        version = str(metadata.get("resourceVersion"))
        now = time.monotonic()
        with self._cond:
            seen = self._seen.get(key)
            if event_type != "DELETED":
                if seen is None or seen.version != version:
                    self._seen[key] = Observation(record_from_lease(lease), version, now)
                return
            self._seen.pop(key, None)
            group = (metadata.get("labels") or {}).get(object_names.GROUP_LABEL)
            member = object_names.member_id_of(lease, group) if group is not None else None
            if group is None or member is None:
                return
            # The lease core's one expiry rule, less the slack between observers.
            expired = seen is not None and now >= expires_at(seen) - _SLACK
            self._verdicts[(key[0], group, member)] = expired
            while len(self._verdicts) > _REMEMBERED:
                self._verdicts.popitem(last=False)
            self._cond.notify_all()

    def verdict(self, namespace: str, group: str, member: str, timeout: float) -> bool:
        """True if the member expired, False if it left (or nothing was seen in time)."""
        key = (namespace, group, member)
        deadline = time.monotonic() + timeout
        with self._cond:
            while key not in self._verdicts:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return self._verdicts.pop(key)


departures = Departures()
