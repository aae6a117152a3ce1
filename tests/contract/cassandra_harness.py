"""The contract harness for cassandra://: the session's real Cassandra 5.0 server, one
keyspace shared by the run (tests use fresh names), short timings.

TTL 4 s (lease_duration), renew deadline 2 s (< TTL - 1 s: TTLs count whole seconds),
renewals every 0.5 s, polls every 0.2 s. crash() is the coordinator's simulate_crash():
the driver's connections close without a release or a leave, as after kill -9; what it
held goes with its TTL, which expire() waits out.
"""

from __future__ import annotations

import time

from .harness import UrlHarness

SESSION_TIMEOUT = 4
TIMINGS = {"lease_duration": SESSION_TIMEOUT, "renew_deadline": 2.0, "retry_period": 0.5, "poll_period": 0.2}


class CassandraHarness(UrlHarness):
    name = "cassandra"
    settle = 15.0
    increments_per_thread = 25
    """All keys of a store share one Paxos partition: 8 threads x 25 contended increments
    take ~10 s on a loaded 2-core machine."""

    def __init__(self, url: str) -> None:
        super().__init__(url, **TIMINGS)

    def expire(self) -> None:
        time.sleep(SESSION_TIMEOUT)
