"""The life cycle every kubecoord resource shares, registered once per kind.

- create / resume / spec change: create the backing objects (kubernetes backend: Lease or
  ConfigMap with an ownerReference), reconcile the Role and RoleBinding of spec.clients.
- a daemon per resource: opens a status mirror (kubecoord listeners, so driven by the
  backend's watches), writes status and conditions whenever the mirror wakes, posts
  Events, and lets the kind's ``after_snapshot`` hook act (member GC).
- delete: on the zookeeper backend a finalizer purges the znodes, bounded (CLEANUP_SECONDS
  per try, CLEANUP_RETRIES tries, then kopf removes the finalizer and logs the failure);
  the way out of a finalizer that must not wait is
  ``kubectl patch KIND NAME --type=merge -p '{"metadata":{"finalizers":null}}'``. The
  kubernetes backend needs no finalizer: ownerReferences let the garbage collector remove
  the backing objects, and the operator deletes its own at once when it sees the deletion.

Guarantees: the daemon is the only writer of ``status``; a status write happens only when
the status differs from the last one written; the backend being down turns
BackendReachable and Ready False (with the error as message) and is retried with backoff,
never crashing the daemon. A status write the API refuses (422, 413, 429, 5xx, timeouts)
is logged and retried with backoff; it never ends the daemon either.

Spec edits: the update handler wakes the daemon, which re-opens its mirror with the new
spec (backend, timings, sizeLimit, ZooKeeper hosts) before it writes anything more;
``observedGeneration`` is always the generation of the spec the running mirror uses.

Drift repair (kubernetes backend): every DRIFT_SECONDS, and on every wake, the daemon
checks the backing Lease or ConfigMaps and re-creates any that someone deleted. It never
touches an object of the same name that it did not create (no ownerReference to this
resource, e.g. a client-go application's own Lease): the condition BackingObjects turns
False with reason NotOwned instead, and the object is left as it is.

Stopping: the daemon exits when kopf asks it to (resource deleted, operator stopping);
kopf cancels it only if it has not within STOP_SECONDS.

Not guaranteed: status while the operator is down (a standby takes over within the
lease duration and re-reads the live state).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import kopf

from kubecoord.api import Coordinator
from kubecoord.errors import CoordinationError
from kubecoord.group_coordinator.record import derived_name
from kubecoord.history import EventLog, HistoryTarget, open_event_log
from kubecoord.operator import backing, kubeapi, lease_grants, metrics, rbac
from kubecoord.operator.conditions import set_condition
from kubecoord.operator.connections import connections
from kubecoord.operator.mirror import Mirror, Notice, Snapshot
from kubecoord.operator.model import BackendSpec
from kubecoord.wire.crd import GROUP, KINDS, VERSION

log = logging.getLogger("kubecoord.operator")

RESYNC_SECONDS = 300.0
"""A backstop re-read when no listener fired for this long (watches drive everything else)."""
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0)
DRIFT_SECONDS = 10.0
"""How often a kubernetes-backed resource's backing objects are checked (one GET each)."""
REPAIR_SECONDS = 0.5
"""Least time between two repairs of objects the watch shows missing (the mirror wakes on it)."""
STOP_SECONDS = 5.0
RECONCILE_BACKOFF_SECONDS = 5.0
"""Retry of a failed reconcile (kopf's default is 60 s): the resource is not Ready until it
succeeds, so a passing API-server hiccup should not keep clients out for a minute."""
CLEANUP_SECONDS = 10.0
CLEANUP_RETRIES = 3
CLEANUP_BACKOFF_SECONDS = 3.0

_wakers: dict[tuple[str, str, str], Callable[[], None]] = {}
"""(plural, namespace, name) -> wake the running daemon (the spec-update handler's way in)."""
_reconciled: dict[tuple[str, str, str], int | None] = {}
"""(plural, namespace, name) -> the generation whose backing objects and client Role were
last written. The daemon runs beside the reconcile handler, and Ready must not tell a
client's `kubectl wait` to go before its RoleBinding exists."""

MirrorFactory = Callable[[Coordinator, dict[str, Any], Callable[[], None]], Mirror]
"""(coordinator, resource body, wake) -> mirror; runs in a worker thread."""
AfterSnapshot = Callable[["Context", Snapshot], Awaitable[None]]


class History:
    """The operator's coordination event log (``kubecoord operator --history PATH``).

    One JsonlEventLog per (backend, namespace), all appending to the same target, with
    source="operator"; nothing is recorded while no target is set.
    """

    target: HistoryTarget = None
    _logs: ClassVar[dict[tuple[str, str], EventLog]] = {}

    @classmethod
    def record(cls, backend: BackendSpec, namespace: str, **fields: Any) -> None:
        if cls.target is None:
            return
        key = (backend.backend, namespace)
        if key not in cls._logs:
            cls._logs[key] = open_event_log(cls.target, backend=backend.backend, namespace=namespace, source="operator")
        cls._logs[key].record(**fields)

    @classmethod
    def close(cls) -> None:
        logs, cls._logs = list(cls._logs.values()), {}
        for event_log in logs:
            event_log.close()


@dataclass
class Context:
    """What a kind's hook may use: the live body, its backend and a way to post Events."""

    body: kopf.Body
    backend: BackendSpec
    mirror: Mirror

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    def post(self, notice: Notice) -> None:
        kopf.event(self.body, type=notice.type, reason=notice.reason, message=notice.message)


def register(plural: str, factory: MirrorFactory, after_snapshot: AfterSnapshot | None = None) -> None:
    """Register the create/resume/update, daemon and delete handlers of one kind."""
    kind = KINDS[plural]

    @kopf.on.resume(GROUP, VERSION, plural, id="reconcile", backoff=RECONCILE_BACKOFF_SECONDS)
    @kopf.on.create(GROUP, VERSION, plural, id="reconcile", backoff=RECONCILE_BACKOFF_SECONDS)
    @kopf.on.update(GROUP, VERSION, plural, id="reconcile", field="spec", backoff=RECONCILE_BACKOFF_SECONDS)
    async def reconcile(body: kopf.Body, spec: kopf.Spec, **_: Any) -> None:
        try:
            kv_shards = None
            if spec.get("backend", "kubernetes") == "kubernetes":
                backing_objects = await backing.ensure(dict(body))
                kv_shards = sum(obj["kind"] == "ConfigMap" for obj in backing_objects) or None
            if kind in lease_grants.KINDS:  # the confinement first, then the grant it confines
                await lease_grants.reconcile(body["metadata"]["namespace"])
            await rbac.reconcile(dict(body), kv_shards=kv_shards)
        except Exception:
            metrics.RECONCILES.labels(kind, "error").inc()
            metrics.ERRORS.labels(kind, "reconcile").inc()
            raise
        metrics.RECONCILES.labels(kind, "ok").inc()
        key = (plural, body["metadata"]["namespace"], body["metadata"]["name"])
        _reconciled[key] = body["metadata"].get("generation")
        waker = _wakers.get(key)
        if waker is not None:  # the daemon reports Ready now, or re-opens its mirror with a new spec
            waker()

    @kopf.daemon(GROUP, VERSION, plural, id="mirror", cancellation_backoff=STOP_SECONDS,
                 cancellation_timeout=1.0, backoff=2.0)
    async def mirror(body: kopf.Body, stopped: kopf.DaemonStopped, **_: Any) -> None:
        metrics.MIRRORED.labels(kind).inc()
        key = (plural, body["metadata"]["namespace"], body["metadata"]["name"])
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def notify() -> None:
            loop.call_soon_threadsafe(wake.set)

        _wakers[key] = notify
        watcher = asyncio.create_task(_wake_when_stopped(stopped, wake))
        try:
            while not stopped:
                spec = dict(body.get("spec") or {})
                generation = body["metadata"].get("generation")
                backend = BackendSpec.from_spec(spec, namespace=key[1])
                await _mirror_loop(kind, plural, body, backend, factory, after_snapshot,
                                   _Run(spec, generation, wake, notify, stopped))
        finally:
            watcher.cancel()
            if _wakers.get(key) is notify:
                del _wakers[key]
            metrics.MIRRORED.labels(kind).dec()

    _without_finalizer(mirror)

    @kopf.on.delete(GROUP, VERSION, plural, id="cleanup", when=_outside_kubernetes,
                    retries=CLEANUP_RETRIES, backoff=CLEANUP_BACKOFF_SECONDS)
    async def cleanup(body: kopf.Body, spec: kopf.Spec, name: str, namespace: str | None, retry: int,
                      **_: Any) -> None:
        # The finalizer's handler, only where Kubernetes cannot clean up (ZooKeeper znodes).
        # Bounded: CLEANUP_SECONDS per try, CLEANUP_RETRIES tries; then kopf gives up, logs the
        # failure and removes the finalizer, so a dead ensemble never blocks deletion forever.
        namespace = str(namespace)
        backend = BackendSpec.from_spec(dict(spec), namespace=namespace)
        try:
            deleted = await asyncio.wait_for(_purge(backend, kind, name), timeout=CLEANUP_SECONDS)
        except Exception as error:
            metrics.ERRORS.labels(kind, "delete").inc()
            last = retry + 1 >= CLEANUP_RETRIES
            log.log(logging.ERROR if last else logging.INFO,
                    "cleanup gave up: znodes may remain" if last else "cleanup failed; will retry",
                    extra={"kind": kind, "resource": f"{namespace}/{name}", "try": retry + 1,
                           "error": f"{type(error).__name__}: {error}"[:300]})
            raise
        _reconciled.pop((plural, namespace, name), None)
        metrics.forget(namespace, name)
        log.info("cleaned up", extra={"kind": kind, "resource": f"{namespace}/{name}", "deleted": deleted})

    @kopf.on.delete(GROUP, VERSION, plural, id="cleanup-owned", when=_on_kubernetes, optional=True)
    async def cleanup_owned(body: kopf.Body, name: str, namespace: str | None, **_: Any) -> None:
        # No finalizer on the kubernetes backend: every backing object carries an
        # ownerReference, so Kubernetes' garbage collector removes it with the resource. When
        # the operator happens to see the deletion it also deletes what is its own at once.
        namespace = str(namespace)
        try:
            deleted = await backing.delete_all(dict(body))
        except (kubeapi.ApiException, OSError) as error:
            log.info("cleanup left to the garbage collector", extra={"kind": kind, "error": str(error)[:300]})
            deleted = 0
        if kind in lease_grants.KINDS:
            try:
                await lease_grants.reconcile(namespace)
            except (kubeapi.ApiException, OSError) as error:
                log.info("lease grants left to the next reconcile", extra={"kind": kind, "error": str(error)[:300]})
        _reconciled.pop((plural, namespace, name), None)
        metrics.forget(namespace, name)
        log.info("cleaned up", extra={"kind": kind, "resource": f"{namespace}/{name}", "deleted": deleted})


def _without_finalizer(fn: Callable[..., Any]) -> None:
    """Let ``fn``'s daemon run without kopf's finalizer.

    kopf puts a finalizer on every object a daemon serves so that it can stop the daemon
    before the object goes; with the operator uninstalled or down, that finalizer blocks the
    deletion forever (and ``helm uninstall`` with crds.keep=false waits on it). The mirror
    needs no such guarantee: kopf stops it on the DELETED event all the same, and a status
    write to a deleted object is a 404 that patch_status ignores. kopf (pinned) has no
    option for this, so the registered handler is replaced by a copy without the flag.
    """
    spawning = kopf.get_default_registry()._spawning
    for index, handler in enumerate(spawning._handlers):
        if handler.fn is fn:
            spawning._handlers[index] = dataclasses.replace(handler, requires_finalizer=False)


def _on_kubernetes(spec: kopf.Spec, **_: Any) -> bool:
    return bool(spec.get("backend", "kubernetes") == "kubernetes")


def _outside_kubernetes(spec: kopf.Spec, **_: Any) -> bool:
    return not _on_kubernetes(spec)


async def _purge(backend: BackendSpec, kind: str, name: str) -> int:
    """Remove a resource's znodes through the backend (ephemeral ones go with their sessions)."""
    coordinator = await connections.acquire(backend)
    try:
        purge = getattr(coordinator, "purge", None)
        if purge is not None:
            primitive = {"LeaderElection": "leader_election", "Group": "group", "KVStore": "kv"}[kind]
            deleted = int(await asyncio.to_thread(purge, primitive, name) or 0)
            if kind == "Group":  # the group coordinator's record and election (kubecoord.group_coordinator)
                for derived in ("kv", "leader_election"):
                    deleted += int(await asyncio.to_thread(purge, derived, derived_name(name)) or 0)
            return deleted
        if kind == "KVStore":
            return await asyncio.to_thread(_delete_every_key, coordinator, name)
        log.warning("backend cannot purge", extra={"backend": backend.backend, "kind": kind, "resource": name})
        return 0
    finally:
        await connections.release(backend)


def _delete_every_key(coordinator: Coordinator, name: str) -> int:
    deleted = 0
    with coordinator.storage(name) as storage:
        pending = [""]
        keys: list[str] = []
        while pending:
            namespace = pending.pop()
            for child in storage.children(namespace):
                path = f"{namespace}/{child}" if namespace else child
                pending.append(path)
                keys.append(path)
        for key in sorted(keys, key=len, reverse=True):
            try:
                storage.delete(key)
                deleted += 1
            except CoordinationError:
                pass  # a pure namespace (no value of its own) or deleted meanwhile
    return deleted


async def _wake_when_stopped(stopped: kopf.DaemonStopped, wake: asyncio.Event) -> None:
    await stopped.wait()
    wake.set()


@dataclass
class _Run:
    """One run of the mirror loop: the spec it runs with, and how it is woken or stopped."""

    spec: dict[str, Any]
    generation: int | None
    wake: asyncio.Event
    notify: Callable[[], None]
    stopped: kopf.DaemonStopped

    def over(self, body: kopf.Body) -> bool:
        """Stop this run: kopf asked the daemon to exit, or the spec changed under it."""
        return bool(self.stopped) or dict(body.get("spec") or {}) != self.spec

    async def pause(self, seconds: float) -> None:
        """Sleep up to ``seconds``; a wake (a change, a spec edit, a stop) ends it early."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), timeout=seconds)


class _StatusWriter:
    """Writes status when it changed; a refused write is logged and retried, never raised."""

    def __init__(self, kind: str, plural: str, namespace: str, name: str) -> None:
        self.kind, self.plural, self.namespace, self.name = kind, plural, namespace, name
        self.written: dict[str, Any] | None = None
        self.failures = 0

    async def write(self, status: dict[str, Any]) -> bool:
        """True when the API has the status (now or already); False after a refused write."""
        if status == self.written:
            return True
        try:
            await kubeapi.patch_status(self.plural, self.namespace, self.name, status)
        except Exception as error:  # 422/413 (too large, invalid), 429, 5xx, timeouts: retried
            metrics.ERRORS.labels(self.kind, "status").inc()
            self.failures += 1
            log.warning("status write failed; will retry", extra={
                "kind": self.kind, "resource": f"{self.namespace}/{self.name}",
                "status_code": getattr(error, "status", None), "error": f"{type(error).__name__}: {error}"[:500],
            })
            return False
        self.written, self.failures = status, 0
        return True

    @property
    def retry_in(self) -> float:
        return RETRY_SECONDS[min(self.failures, len(RETRY_SECONDS)) - 1] if self.failures else RESYNC_SECONDS


def _all_cached(body: kopf.Body, coordinator: Coordinator) -> bool:
    observed = getattr(coordinator, "observed", None)
    return observed is not None and backing.cached_and_owned(dict(body), observed)


async def _repair_drift(body: kopf.Body, backend: BackendSpec, coordinator: Coordinator) -> list[str]:
    """Re-create deleted backing objects; the names of same-named objects that are not ours."""
    if backend.backend != "kubernetes":
        return []
    if body.get("kind") in lease_grants.KINDS:
        try:
            await lease_grants.check_drift(body["metadata"]["namespace"])
        except (kubeapi.ApiException, OSError) as error:
            log.info("lease grants check failed",
                     extra={"resource": body["metadata"]["name"], "error": str(error)[:300]})
    if _all_cached(body, coordinator):
        return []  # all there and ours, as the shared watch shows: no request (thousands of resources)
    try:
        ensured = await backing.ensure_owned(dict(body), getattr(coordinator, "last_state", None))
    except (kubeapi.ApiException, OSError) as error:
        log.info("drift check failed", extra={"resource": body["metadata"]["name"], "error": str(error)[:300]})
        return []
    if ensured.created:
        log.info("re-created deleted backing objects", extra={"resource": body["metadata"]["name"],
                                                               "objects": ensured.created})
    return ensured.foreign


async def _mirror_loop(
    kind: str,
    plural: str,
    body: kopf.Body,
    backend: BackendSpec,
    factory: MirrorFactory,
    after_snapshot: AfterSnapshot | None,
    run: _Run,
) -> None:
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    conditions: list[dict[str, Any]] = list((body.get("status") or {}).get("conditions") or [])
    writer = _StatusWriter(kind, plural, namespace, name)
    failures = 0
    generation = run.generation

    async def unreachable(error: Exception) -> None:
        nonlocal conditions, failures
        metrics.ERRORS.labels(kind, "mirror").inc()
        message = f"{type(error).__name__}: {error}"
        conditions = set_condition(
            conditions, "BackendReachable", False, "BackendUnavailable", message, generation=generation
        )
        conditions = set_condition(conditions, "Ready", False, "BackendUnavailable", message, generation=generation)
        await writer.write({"conditions": conditions})
        run.wake.clear()
        await run.pause(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])
        failures += 1

    while True:  # connect, retrying while the backend is down
        if run.over(body):
            return
        try:
            coordinator = await connections.acquire(backend)
            break
        except CoordinationError as error:
            await unreachable(error)
    try:
        mirror = await asyncio.to_thread(factory, coordinator, dict(body), run.notify)
    except CoordinationError as error:
        await connections.release(backend)
        await unreachable(error)
        return  # the daemon starts the next run
    except BaseException:
        await connections.release(backend)
        raise
    context = Context(body=body, backend=backend, mirror=mirror)
    last_drift_check = -DRIFT_SECONDS
    foreign: list[str] = []
    try:
        while not run.over(body):
            run.wake.clear()
            try:
                snapshot = await asyncio.to_thread(mirror.snapshot)
            except CoordinationError as error:
                await unreachable(error)
                continue
            failures = 0
            since = time.monotonic() - last_drift_check
            # A backing object the watch shows deleted is re-created at once (its clients
            # wait for it), not at the next periodic check; a foreign one is only reported.
            missing = backend.backend == "kubernetes" and not foreign and not _all_cached(body, coordinator)

            if since >= DRIFT_SECONDS or (missing and since >= REPAIR_SECONDS):
                last_drift_check = time.monotonic()
                foreign = await _repair_drift(body, backend, coordinator)
            ready, reason, message = snapshot.ready
            if _reconciled.get((plural, namespace, name), -1) != generation:
                ready, reason, message = False, "Reconciling", "backing objects and client access are being written"
            conditions = set_condition(
                conditions,
                "BackendReachable",
                True,
                "Connected",
                f"{backend.backend} backend reachable",
                generation=generation,
            )
            if foreign:
                conditions = set_condition(
                    conditions, "BackingObjects", False, "NotOwned",
                    f"{', '.join(foreign)} exists and was not created for this {kind}; the operator leaves it "
                    "untouched (rename the resource or remove that object)", generation=generation,
                )
            elif backend.backend == "kubernetes":
                conditions = set_condition(conditions, "BackingObjects", True, "Owned",
                                           "backing objects present and owned", generation=generation)
            conditions = set_condition(conditions, "Ready", ready, reason, message, generation=generation)
            await writer.write({**snapshot.status, "observedGeneration": generation, "conditions": conditions})
            if snapshot.changed_at is not None:
                metrics.STATUS_LAG.labels(kind).observe(time.monotonic() - snapshot.changed_at)
            for notice in snapshot.notices:
                context.post(notice)
            if after_snapshot is not None:
                try:
                    await after_snapshot(context, snapshot)
                except (CoordinationError, kubeapi.ApiException, OSError) as error:
                    metrics.ERRORS.labels(kind, "mirror").inc()
                    # 404/409: an object went or changed meanwhile (a member left, a Lease was
                    # deleted and is being re-created): normal operation, retried next wake.
                    race = getattr(error, "status", None) in (404, 409)
                    log.log(logging.INFO if race else logging.WARNING, "after-snapshot step failed",
                            extra={"kind": kind, "resource": name, "status_code": getattr(error, "status", None),
                                   "error": str(error)[:500]})
            pause = min(writer.retry_in, DRIFT_SECONDS if backend.backend == "kubernetes" else RESYNC_SECONDS)
            if missing:
                pause = min(pause, REPAIR_SECONDS)  # until the watch shows the re-created object
            await run.pause(pause)
    finally:
        await asyncio.to_thread(mirror.close)
        await connections.release(backend)
