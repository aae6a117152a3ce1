"""Short lease timings for the etcd tests: a killed kubecoord process's keys go ~3 s later."""

from typing import Any

SESSION_TTL = 3
TIMINGS: dict[str, Any] = {"session_ttl": SESSION_TTL, "renew_deadline": 1.5, "keepalive_period": 0.3}
