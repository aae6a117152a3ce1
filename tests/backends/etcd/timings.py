"""Short lease timings for the etcd tests: a killed kubecoord process's keys go ~3 s later."""

from typing import Any

LEASE_DURATION = 3
TIMINGS: dict[str, Any] = {"lease_duration": LEASE_DURATION, "renew_deadline": 1.5, "retry_period": 0.3}
