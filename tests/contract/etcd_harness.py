"""The contract harness for etcd://: the session's real etcd (testkit), a fresh PREFIX per
test, short timings.

Lease TTL 3 s (lease_duration; etcd's minimum is 2 s with its default election timeout),
renew deadline 1.5 s (< TTL - 1 s), keep-alives every 0.3 s. crash() is the coordinator's
simulate_crash(): keep-alives stop without a revoke, as after kill -9; what it held goes
with its lease's TTL, which expire() waits out.
"""

from __future__ import annotations

import time
import uuid

from .harness import UrlHarness

LEASE_DURATION = 3
TIMINGS = {"lease_duration": LEASE_DURATION, "renew_deadline": 1.5, "retry_period": 0.3}


class EtcdHarness(UrlHarness):
    name = "etcd"
    settle = 10.0

    def __init__(self, hosts: str) -> None:
        self.prefix = f"contract-{uuid.uuid4().hex[:12]}"
        super().__init__(f"etcd://{hosts}/{self.prefix}", **TIMINGS)

    def expire(self) -> None:
        # etcd's leader checks lease expiry every 500 ms after the TTL.
        time.sleep(LEASE_DURATION + 0.5)
