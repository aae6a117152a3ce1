"""LeaderElection on cassandra://: the lease core's election over election_rows.ElectionRows.

Each nominated candidate runs kubecoord._core.lease's Elector (client-go's loop: acquire,
renew every retry_period, is_leader() from the renew deadline on the monotonic clock) over
the handle's ElectionRows. Cassandra has no watch: the handle polls the election's rows
every ``poll_period`` (one or two single-row reads) and steps its candidates when the
version changed, so a released or expired election is taken over within a poll period.

Why the holder cannot outlive its own view: a leader counts as leader until
``renew_deadline`` after it *sent* its last successful write; the holder row's TTL
(the election's ``lease_duration``) starts when the server applied that write, and
Cassandra's TTLs have one-second granularity, so the row can vanish as early as
``lease_duration - 1`` seconds after the write. options.lease_timings therefore requires
``renew_deadline < lease_duration - 1``: is_leader() turns False before any other
candidate — kubecoord's or a seed peer's — can take the row, given clocks (this host's
and the Cassandra nodes') that tick at similar rates. Takeover itself is decided by the
server (``INSERT ... IF NOT EXISTS`` on a vanished row), never by comparing clocks.

Not guaranteed: that a seed peer stops in time — the seed plugin ignores whether its
renewals applied; and listener calls when a row merely expires with nobody to take it
are at most one poll period late.
"""

from __future__ import annotations

import logging

from kubecoord._core.lease import Observation
from kubecoord._core.lease.election import Candidate, LeaseElection
from kubecoord.backends.cassandra.context import CassandraContext
from kubecoord.backends.cassandra.election_rows import ElectionRows
from kubecoord.backends.cassandra.poller import Poller
from kubecoord.errors import CoordinationError
from kubecoord.timings import Timings

log = logging.getLogger("kubecoord.cassandra")


class CassandraElection(LeaseElection):
    def __init__(self, context: CassandraContext, service: str, timings: Timings) -> None:
        super().__init__(
            context, service, context.events, timings=timings, clock=context.clock,
            request_timeout=context.options.request_timeout,
        )
        self._context = context
        self._rows = ElectionRows(context.session, service, ttl=int(timings.lease_duration), clock=context.clock)
        self._poll_period = context.options.poll_period
        self._poller = Poller(f"kubecoord-cassandra-election-{service}", self._poll, closed=lambda: self._closed)

    # -- polling (Cassandra's watch) -----------------------------------------------------
    def _poll(self) -> float:
        if self._closed:
            return self._poll_period
        try:
            changed = self._rows.poll()
        except CoordinationError as exc:
            log.debug("election poll failed", extra={"service": self.service, "error": str(exc)})
            return self._poll_period
        if changed:
            self._changed(step=True)
        return self._poll_period

    # -- lease core hooks ---------------------------------------------------------------
    def _store(self, candidate_id: str) -> ElectionRows:
        return self._rows

    def _started(self, candidate: Candidate) -> None:
        self._poller.ensure()

    def _withdrawn(self, candidate: Candidate) -> None:
        pass

    def _view(self, *, start: bool) -> Observation | None:
        if start:
            # get_leader(): read now (a poll may be up to poll_period old; errors are the caller's).
            if self._rows.poll():
                self._changed(step=False)
            self._poller.ensure()
        return self._rows.observed()

    def _notify(self, leader: str | None) -> None:
        self._context.dispatcher.notify(self._listeners, leader)

    def _stopped(self) -> bool:
        return self._context.crashed

    def _listener_added(self, first: bool) -> None:
        if not self._closed and not self._context.crashed:
            self._poller.ensure()

    # -- lifecycle ----------------------------------------------------------------------
    def _stop_observing(self) -> None:
        self._poller.stop()

    def crash(self) -> None:
        self._closed = True
        for candidate in list(self._candidates):
            self._rows.forget(candidate)
        self._withdraw_all(release=False)
        self._stop_observing()
