"""Prometheus metrics of the client library: leadership state, renew latency, watch restarts.

Recorded into prometheus_client's default registry when that package is installed (it
comes with the ``operator`` extra; add it to an application to export these), and
no-ops otherwise — the library never requires it. Expose them from an application with
``prometheus_client.start_http_server(PORT)``. prometheus_client adds a ``_created``
series to every counter and histogram; the library leaves that switch to the application
(``prometheus_client.disable_created_metrics()`` turns it off process-wide, as
``kubecoord operator`` does).

===========================================  =========  ===================================
metric                                       type       labels
===========================================  =========  ===================================
kubecoord_client_is_leader                   gauge      backend, service, candidate: 1 while
                                                        the candidate leads in its own view
kubecoord_client_leadership_changes_total    counter    backend, service: acquired or lost
kubecoord_client_renew_seconds               histogram  backend: one renewal's round trip
kubecoord_client_watch_restarts_total        counter    backend, resource: watches re-opened
                                                        (expiry, 410 Gone, broken stream)
===========================================  =========  ===================================

Guarantee: every function here is cheap, thread-safe and never raises.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("kubecoord.metrics")

try:
    from prometheus_client import Counter, Gauge, Histogram
except ImportError:  # pragma: no cover - exercised only without the operator extra
    _enabled = False
else:
    _enabled = True
    _IS_LEADER = Gauge("kubecoord_client_is_leader", "1 while the candidate leads", ["backend", "service", "candidate"])
    _CHANGES = Counter(
        "kubecoord_client_leadership_changes", "Leadership acquired or lost by this process", ["backend", "service"]
    )
    _RENEW = Histogram(
        "kubecoord_client_renew_seconds",
        "Round trip of one leadership or membership renewal",
        ["backend"],
        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    )
    _WATCH_RESTARTS = Counter("kubecoord_client_watch_restarts", "Watches re-opened", ["backend", "resource"])


def _guard(fn: Any, *args: Any) -> None:
    if not _enabled:
        return
    try:
        fn(*args)
    except Exception:  # metrics must never break coordination
        log.debug("metric update failed", exc_info=True)


def leadership(backend: str, service: str, candidate: str, leading: bool) -> None:
    """Record that ``candidate`` acquired (True) or lost (False) leadership of ``service``."""

    def update() -> None:
        _IS_LEADER.labels(backend, service, candidate).set(1 if leading else 0)
        _CHANGES.labels(backend, service).inc()

    _guard(update)


def renewed(backend: str, seconds: float) -> None:
    """Record one renewal's round trip."""
    _guard(lambda: _RENEW.labels(backend).observe(seconds))


def watch_restarted(backend: str, resource: str) -> None:
    """Record that a watch had to be re-opened."""
    _guard(lambda: _WATCH_RESTARTS.labels(backend, resource).inc())
