"""The timings of the Cassandra process tests: TTL 4 s, renew deadline 2.4 s, renewals every
0.4 s, polls every 0.2 s (a machine at load 20 still renews several times per deadline)."""

from __future__ import annotations

from typing import Any

SESSION_TIMEOUT = 4
TIMINGS: dict[str, Any] = {  # connect() takes **options: Any
    "lease_duration": SESSION_TIMEOUT, "renew_deadline": 2.4, "retry_period": 0.4, "poll_period": 0.2
}
