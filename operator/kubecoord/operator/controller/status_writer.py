"""How a resource's status is written: ``StatusWriter`` writes it only when it differs
from what it last wrote, and never raises: a refused write (422, 413, 429, 5xx, timeouts,
not leading) is logged, counted and reported to the caller, which retries it with the
key's backoff.
"""

from __future__ import annotations

import logging
from typing import Any

from kubecoord.operator import kubeapi, metrics
from kubecoord.operator.controller.owners import Key

log = logging.getLogger("kubecoord.operator")


class StatusWriter:
    """Writes status when it changed; a refused write is logged and counted, never raised."""

    def __init__(self, kind: str, key: Key) -> None:
        self.kind, self.key = kind, key
        self.written: dict[str, Any] | None = None
        self.failures = 0

    async def write(self, status: dict[str, Any]) -> bool:
        """True when the API has the status (now or already); False after a refused write."""
        if status == self.written:
            return True
        plural, namespace, name = self.key
        try:
            await kubeapi.patch_status(plural, namespace, name, status)
        except Exception as error:  # 422/413 (too large, invalid), 429, 5xx, timeouts, not leading: retried
            metrics.ERRORS.labels(self.kind, "status").inc()
            self.failures += 1
            log.warning("status write failed; will retry", extra={
                "kind": self.kind, "resource": f"{namespace}/{name}",
                "status_code": getattr(error, "status", None), "error": f"{type(error).__name__}: {error}"[:500],
            })
            return False
        self.written, self.failures = status, 0
        return True
