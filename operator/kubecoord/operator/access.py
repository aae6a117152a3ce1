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

The writes are asked too, without making one: a SelfSubjectAccessReview per verb the
operator's work needs (``writes``: create, update, patch, delete of Leases and ConfigMaps;
create, patch, delete of Roles and RoleBindings; create of Events; patch of each kind and
of its status), in every namespace at once for an operator watching all of them (the
review's empty namespace: a Role in some namespaces is not enough), else in each watched
one. The API server's authorizer answers from its RBAC caches (no storage read), and the
reviews are asked every ``write_every`` rounds (the first round included), their verdict
kept between: a write right taken away shows on /readyz within ``write_every x interval``
seconds. A review that is refused or fails counts as the same problem as a refused read.

Not judged here: what admission may still refuse (the chart's policies refuse a write of
an object that is not kubecoord's, by design), and a right granted on some objects only
(``resourceNames``): a review without a name is refused then, though the objects named
could be written. A write refused for those reasons is the resource's own failure — its
Ready condition False with the API's message, an Event, kubecoord_operator_errors_total.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Callable

from kubecoord.operator import kubeapi
from kubecoord.operator.health import HealthState
from kubecoord.wire.crd import GROUP, KINDS, VERSION

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

log = logging.getLogger("kubecoord.operator.access")

INTERVAL_SECONDS = 10.0
"""Between two rounds of probes: a refusal shows on /readyz within this (the chart's
readiness probe then takes 3 x 10 s to act on it)."""
WRITE_EVERY = 6
"""Rounds between two askings of the write reviews (the first round asks them): 60 s at the
default interval."""

WRITTEN: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("coordination.k8s.io", "leases", ("create", "update", "patch", "delete")),
    ("", "configmaps", ("create", "update", "patch", "delete")),
    ("rbac.authorization.k8s.io", "roles", ("create", "patch", "delete")),
    ("rbac.authorization.k8s.io", "rolebindings", ("create", "patch", "delete")),
    ("", "events", ("create",)),
    *((GROUP, plural, ("patch",)) for plural in KINDS),
    *((GROUP, f"{plural}/status", ("patch",)) for plural in KINDS),
)
"""(API group, resource[/subresource], verbs) the operator writes in every namespace it
watches: the backing objects (kubecoord.operator.backing), the grants
(kubecoord.operator.rbac, lease_grants), Events, kopf's finalizer patches and the status
(the chart's kubecoord.resourceRules)."""


def probes(namespaces: tuple[str, ...], clusterwide: bool) -> list[str]:
    """The GET paths (LIST with limit=1) this replica's work needs."""
    paths = ["/apis/apiextensions.k8s.io/v1/customresourcedefinitions?limit=1"]
    if not clusterwide:
        paths.append("/api/v1/namespaces?limit=1")
    scopes = [""] if clusterwide else [f"/namespaces/{urllib.parse.quote(ns, safe='')}" for ns in namespaces]
    paths += [f"/apis/{GROUP}/{VERSION}{scope}/{plural}?limit=1" for scope in scopes for plural in KINDS]
    return paths


def writes(namespaces: tuple[str, ...], clusterwide: bool) -> list[dict[str, str]]:
    """The SelfSubjectAccessReview resourceAttributes of every write this replica's work needs."""
    scopes = [""] if clusterwide else list(namespaces)
    return [{"namespace": namespace, "verb": verb, "group": group, "resource": resource.partition("/")[0],
             **({"subresource": resource.partition("/")[2]} if "/" in resource else {})}
            for namespace in scopes for group, resource, verbs in WRITTEN for verb in verbs]


def _ask(attributes: dict[str, str]) -> object:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": attributes}}
    return kubeapi.call("POST", REVIEWS, review)


def check_writes(reviews: list[dict[str, str]], ask: Callable[[dict[str, str]], object] = _ask) -> str | None:
    """The first write the API server's authorizer refuses, in one line, or None."""
    for attributes in reviews:
        try:
            answer = ask(attributes)
        except kubeapi.ApiException as error:
            return f"the API server answered an error to a SelfSubjectAccessReview: {error}"
        except Exception as error:  # as in check: the server is not reachable
            return f"the API server is unreachable: POST {REVIEWS}: {type(error).__name__}: {error}"
        status = (answer or {}).get("status") or {} if isinstance(answer, dict) else {}
        if not status.get("allowed"):
            resource = attributes["resource"] + (f"/{attributes['subresource']}" if "subresource" in attributes else "")
            group = attributes["group"] or "core"
            where = f"namespace {attributes['namespace']}" if attributes["namespace"] else "every namespace"
            reason = f" ({status['reason']})" if status.get("reason") else ""
            return (f"refused by the API server (RBAC): may not {attributes['verb']} {resource} ({group}) in "
                    f"{where}, which its work needs (SelfSubjectAccessReview){reason}")
    return None


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
    """Runs ``check`` every ``interval`` seconds and ``check_writes`` every ``write_every``
    rounds on a daemon thread and keeps ``health.access_problem`` up to date (the first
    round, reads and writes, before ``start`` returns)."""

    def __init__(self, health: HealthState, paths: list[str], reviews: list[dict[str, str]] | None = None, *,
                 interval: float = INTERVAL_SECONDS, write_every: int = WRITE_EVERY,
                 get: Callable[[str], object] | None = None,
                 ask: Callable[[dict[str, str]], object] | None = None) -> None:
        self.health, self.paths, self.reviews, self.interval = health, paths, reviews or [], interval
        self.write_every = write_every
        self._get, self._ask = get, ask
        self._since_writes = write_every  # the first round asks them
        self._write_problem: str | None = None
        self._stop = threading.Event()

    def _round(self) -> None:
        problem = check(self.paths, self._get) if self._get is not None else check(self.paths)
        # Due, or this replica is not ready: asked every round until it is, so a granted right
        # shows at once.
        if problem is None and (self._since_writes >= self.write_every or self.health.access_problem):
            self._write_problem = check_writes(self.reviews, self._ask) if self._ask is not None else \
                check_writes(self.reviews)
            self._since_writes = 0
        self._since_writes += 1
        problem = problem or self._write_problem
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
