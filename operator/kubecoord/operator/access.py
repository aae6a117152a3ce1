"""Whether this replica can do its work: the API server reachable, and the reads its watches
need allowed, asked of the API server itself every ``interval`` seconds.

The reads are the ones kopf makes to start and keep its watches, with the operator's own
credentials: the CRDs (kopf's resource discovery; cluster-scoped), the namespaces (a
namespaced operator's), and a LIST of each kubecoord.dev kind in the operator's scope
(every namespace, or each watched one). ``limit=1``: a probe costs the server one small
answer, and standbys probe too — a standby that could not reconcile once it leads is not
ready either.

A refusal (401/403) or an unreachable server is reported as the replica's access problem
(kubecoord.operator.health: /readyz answers 503 and /healthz's body says ok: false, with
the problem) and logged once at ERROR when it appears and once at WARNING when it clears;
not once per retry.

Not checked here: the writes (create a Lease, a ConfigMap, a Role...). A refused write is
the resource's own failure — its Ready condition False with the API's message, an Event,
kubecoord_operator_errors_total — because a write's rights may be scoped to one namespace
or object, which a cluster-level probe cannot judge without making the write.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Callable

from kubecoord.operator import kubeapi
from kubecoord.operator.health import HealthState
from kubecoord.wire.crd import GROUP, KINDS, VERSION

log = logging.getLogger("kubecoord.operator.access")

INTERVAL_SECONDS = 10.0
"""Between two rounds of probes: a refusal shows on /readyz within this (the chart's
readiness probe then takes 3 x 10 s to act on it)."""


def probes(namespaces: tuple[str, ...], clusterwide: bool) -> list[str]:
    """The GET paths (LIST with limit=1) this replica's work needs."""
    paths = ["/apis/apiextensions.k8s.io/v1/customresourcedefinitions?limit=1"]
    if not clusterwide:
        paths.append("/api/v1/namespaces?limit=1")
    scopes = [""] if clusterwide else [f"/namespaces/{urllib.parse.quote(ns, safe='')}" for ns in namespaces]
    paths += [f"/apis/{GROUP}/{VERSION}{scope}/{plural}?limit=1" for scope in scopes for plural in KINDS]
    return paths


def check(paths: list[str], get: Callable[[str], object] = lambda path: kubeapi.call("GET", path)) -> str | None:
    """The first problem the probes meet, in one line, or None when every one is answered."""
    for path in paths:
        try:
            get(path)
        except kubeapi.ApiException as error:
            if error.status in (401, 403):
                return f"refused by the API server (RBAC): {error}"
            return f"the API server answered an error: {error}"
        except Exception as error:  # a refused connection, a timeout, TLS: the server is not reachable
            return f"the API server is unreachable: GET {path.partition('?')[0]}: {type(error).__name__}: {error}"
    return None


class AccessMonitor:
    """Runs ``check`` every ``interval`` seconds on a daemon thread and keeps
    ``health.access_problem`` up to date (the first round before ``start`` returns)."""

    def __init__(self, health: HealthState, paths: list[str], *, interval: float = INTERVAL_SECONDS,
                 get: Callable[[str], object] | None = None) -> None:
        self.health, self.paths, self.interval = health, paths, interval
        self._get = get
        self._stop = threading.Event()

    def _round(self) -> None:
        problem = check(self.paths, self._get) if self._get is not None else check(self.paths)
        previous, self.health.access_problem = self.health.access_problem, problem
        if problem and problem != previous:
            log.error("this replica cannot do its work: %s (not ready; checked again every %g s)", problem,
                      self.interval)
        elif previous and not problem:
            log.warning("the API server answers this replica's probes again: ready")

    def start(self) -> AccessMonitor:
        self._round()

        def loop() -> None:
            while not self._stop.wait(self.interval):
                self._round()

        threading.Thread(target=loop, name="kubecoord-access", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
