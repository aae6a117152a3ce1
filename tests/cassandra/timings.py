"""The timings of the Cassandra process tests: TTL 3 s, renew deadline 1.5 s, renewals every
0.3 s, polls every 0.2 s (a loaded 2-core machine still renews several times per deadline)."""

SESSION_TIMEOUT = 3
TIMINGS = {"session_timeout": SESSION_TIMEOUT, "renew_deadline": 1.5, "retry_period": 0.3, "poll_period": 0.2}
