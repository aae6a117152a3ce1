"""The reconciler: one work queue, a few workers, no task or thread per resource. Its
parts live beside it: the per-resource state and the body cache (controller.cache), the
status and its conditions (controller.status, written by controller.status_writer), the finalizer's clean-up
(controller.finalizer), what a spec writes (controller.spec), the routing of owned
objects' events (controller.routing) and the periodic resync (controller.resync).

Inputs (events never do work, they only enqueue the owning resource's key):
- the CRD watch — kopf's one watch per kind, fed in through ``observe`` — keeps the cache
  of resource bodies (the informer of the three kinds) and enqueues the resource;
- on kubernetes, the namespace's shared Lease and ConfigMap watches (one list+watch per
  kind and namespace, kubecoord.capabilities.StateCache): each event is mapped to the
  resources that read the object (controller.routing: controller-runtime's "watch owned
  objects, enqueue the owner") and those are enqueued; their status is then computed
  from the caches, with no handle per resource (kubecoord.operator.kinds);
- elsewhere (zookeeper, cassandra, etcd, memory, and Groups whose assignment the operator
  leads) the status mirrors' listeners on their handles enqueue the resource whose
  election, group or store changed;
- the create/update handlers enqueue the resource once its backing objects and client
  access are written (``reconciled``);
- a resync every RESYNC_SECONDS (controller.resync) enqueues what drifted from its spec
  with no event saying so: missing or foreign backing objects, stale grants, a changed
  confinement verdict.

A worker's reconcile is level-based: it reads the cached body and the mirror's current
state, computes the status and conditions, writes them only when they differ from what it
last wrote, re-creates backing objects the cache shows deleted (drift repair, at most every
REPAIR_SECONDS per resource) and posts the Events of what changed.

Guarantees:
- A key is reconciled by one worker at a time (the queue's contract); WORKERS keys at most
  are reconciled at once, whatever the number of resources.
- A resource the watch shows DELETED (or with a deletionTimestamp) is dropped at once: its
  mirror closes, nothing of it is written or re-created afterwards — the backing objects
  go with their ownerReferences (Kubernetes' garbage collector), never back. A reconcile
  already running re-checks the cache before every write.
- A resource is known by its uid: one deleted and created again under its name before a
  reconcile ran is a new resource — the old one's clean-up runs first, then the new one's
  backing objects, client access and status are written as for any create.
- Status is written only when it changed (no write while nothing changes); a refused
  write (422, 413, 429, 5xx, timeouts) is logged and retried with the key's backoff.
- A backend that cannot be reached turns BackendReachable and Ready False (with the error)
  and is retried with backoff, never crashing a worker.
- Before its create/update handler has written the backing objects and the clients'
  Role, a resource is not reported Ready (``kubectl wait`` must not release a client
  before its RoleBinding exists): no status is written until that handler succeeds
  (then the first status written is the Ready one) or fails (Ready=False, reason
  Reconciling, with the error, while kopf retries it).
Not guaranteed: status while the operator is down, or while this replica does not hold
the operator Lease (kubecoord.operator.fencing refuses the writes).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.capabilities import ObjectCache
from kubecoord.errors import CoordinationError
from kubecoord.operator import backing, events, kubeapi, metrics
from kubecoord.operator.connections import connections
from kubecoord.operator.controller import resync
from kubecoord.operator.controller import spec as spec_writer
from kubecoord.operator.controller.cache import Entry, plural_of, trimmed
from kubecoord.operator.controller.finalizer import Finalizer, live_metadata
from kubecoord.operator.controller.owners import Key
from kubecoord.operator.controller.resync import RESYNC_SECONDS
from kubecoord.operator.controller.routing import ObjectRouting
from kubecoord.operator.controller.status import compose, unreachable
from kubecoord.operator.controller.status_writer import StatusWriter
from kubecoord.operator.controller.workqueue import ShutDown, WorkQueue
from kubecoord.operator.mirror import Mirror, Notice, Snapshot
from kubecoord.operator.model import BackendSpec
from kubecoord.wire.crd import KINDS

log = logging.getLogger("kubecoord.operator")

WORKERS = 16
"""Reconciles at once, each with at most one request in flight (on the loop,
kubeapi.acall: a worker costs no thread). A reconcile is mostly
waiting for the API server's answers (a backing object or two, a status write), so the
drain rate is workers / round trip: four workers drained about 20 resources a second at
10,000 while the bench created 48 a second."""
REPAIR_SECONDS = 0.5
"""Least time between two repairs of one resource's backing objects."""
REPAIR_GRACE_SECONDS = 5.0
"""No repair this soon after the create/update handler wrote the backing objects: the
watch may not show them yet, and a repair then would cost requests for nothing."""
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0)

MirrorFactory = Callable[[Coordinator, dict[str, Any], Callable[[], None]], Mirror]
"""(coordinator, resource body, wake) -> mirror; runs in a worker thread."""
AfterSnapshot = Callable[["LiveResource", Snapshot], Awaitable[None]]


@dataclass
class LiveResource:
    """What a kind's hook may use: the cached body, its backend, its mirror and its coordinator.
    (Named apart from the kubernetes backend's context and kopf's.)"""

    body: dict[str, Any]
    backend: BackendSpec
    mirror: Mirror
    coordinator: Coordinator

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    def post(self, notice: Notice) -> None:
        events.post_soon(self.body, notice.type, notice.reason, notice.message)


@dataclass(frozen=True)
class KindHooks:
    plural: str
    factory: MirrorFactory
    after_snapshot: AfterSnapshot | None = None


class StatusController:
    """The work queue, its workers and the per-resource state they share."""

    def __init__(self, *, workers: int = WORKERS) -> None:
        self.workers = workers
        self.queue: WorkQueue[Key] = WorkQueue(base_delay=RETRY_SECONDS[0], max_delay=RETRY_SECONDS[-1])
        self.hooks: dict[str, KindHooks] = {}
        self.bodies: dict[Key, dict[str, Any]] = {}
        """The informer cache of the three kinds (kopf's watch feeds it)."""
        self.reconciled: dict[Key, int | None] = {}
        """The generation whose backing objects and client Role were last written."""
        self.entries: dict[Key, Entry] = {}
        self._gone: dict[Key, dict[str, Any]] = {}
        """Deleted resources' final bodies until their clean-up ran."""
        self._handler_foreign: dict[Key, list[str]] = {}
        self._handler_pending: dict[Key, list[str]] = {}
        self._failed: dict[Key, str] = {}
        """Why writing the spec last failed (until it succeeds)."""
        self.resync_seconds = RESYNC_SECONDS
        self.granted: dict[Key, dict[str, Any] | None] = {}
        """The clients' Role last written for the spec in ``applied`` (None: none granted)."""
        self.unconfined: dict[Key, str] = {}
        """Groups whose clients got no Lease writes, and why (kubecoord.operator.confinement)."""
        self.applied: dict[Key, dict[str, Any]] = {}
        """The spec last written (controller.spec): a change's removed clients come from it."""
        self._finalizer = Finalizer()
        self._ensured_at: dict[Key, float] = {}
        """When the create/update handler last wrote the backing objects (monotonic)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        self._routing = ObjectRouting(self.queue)
        """Which resources an owned object's event wakes (cached mirrors)."""

    def register(self, hooks: KindHooks) -> None:
        self.hooks[hooks.plural] = hooks

    # -- inputs -------------------------------------------------------------------------
    def observe(self, event_type: str | None, body: dict[str, Any]) -> None:
        """One watch event of a resource (None: kopf's initial listing)."""
        metadata = body.get("metadata") or {}
        plural = plural_of(body)
        if plural is None:
            return
        key = (plural, str(metadata.get("namespace")), str(metadata.get("name")))
        if event_type == "DELETED" or metadata.get("deletionTimestamp"):
            # Every later version replaces the final body: its clean-up removes the finalizer
            # with the resourceVersion as precondition, and a change after the deletion mark
            # (a status write in flight, another controller's label) made the first one stale.
            if self.bodies.pop(key, None) is not None or event_type == "DELETED" or key in self._gone:
                self._gone[key] = body
        else:
            if _uid(self._gone.get(key)) == _uid(body):
                self._gone.pop(key, None)
            # A final body of another uid stays: the resource was deleted and created again
            # before a reconcile ran, and the old one's clean-up still has to run first.
            kept = trimmed(body)
            entry = self.entries.get(key)
            if entry is not None and kept["status"].get("conditions") == entry.conditions:
                # The conditions this controller wrote, back from the API: keep one copy, not
                # two (about 2 KiB a resource, 20 MiB at 10,000 resources).
                kept["status"] = {**kept["status"], "conditions": entry.conditions}
            self.bodies[key] = kept
        self.queue.add(key)

    async def _write_spec(self, key: Key, body: dict[str, Any], generation: int | None) -> bool:
        """Write what the spec asks for (controller.spec); False (and why, for the Ready
        condition) when it failed: the caller retries the key with its backoff."""
        kind = KINDS[key[0]]
        spec = dict(body.get("spec") or {})
        try:
            written = await spec_writer.write(body, self.applied.get(key))
        except Exception as error:  # refused writes, timeouts, NotLeading: retried with backoff
            metrics.RECONCILES.labels(kind, "error").inc()
            metrics.ERRORS.labels(kind, "reconcile").inc()
            self._failed[key] = f"{type(error).__name__}: {error}"[:300]
            log.warning("reconcile failed; will retry", extra={
                "kind": kind, "resource": f"{key[1]}/{key[2]}", "error": self._failed[key]})
            return False
        metrics.RECONCILES.labels(kind, "ok").inc()
        # One line per create or spec change (what kopf's "Handler succeeded" said before).
        log.info("reconciled", extra={"object": f"{kind} {key[1]}/{key[2]}", "generation": generation})
        self.reconciled[key] = generation
        self.applied[key] = spec
        self.granted[key] = written.role
        if written.unconfined:
            self.unconfined[key] = written.unconfined
        else:
            self.unconfined.pop(key, None)
        self._failed.pop(key, None)
        self._ensured_at[key] = time.monotonic()
        self._handler_foreign[key] = list(written.foreign)
        self._handler_pending[key] = list(written.pending)
        entry = self.entries.get(key)
        if entry is not None:
            entry.foreign = list(written.foreign)
            entry.pending = list(written.pending)
            entry.cached_once = False
        return True

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._tasks = [asyncio.create_task(self._work(), name=f"kubecoord-status-{i}") for i in range(self.workers)]
        self._tasks.append(asyncio.create_task(resync.run(self), name="kubecoord-status-resync"))

    async def stop(self) -> None:
        """Stop the workers and close every mirror (their handles, their connections)."""
        if not self._running:
            return
        self._running = False
        self.queue.shut_down()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for key in list(self.entries):
            await self._drop(key)
        await kubeapi.aclose()
        self.bodies.clear()
        self.reconciled.clear()
        self.granted.clear()
        self.queue = WorkQueue(base_delay=RETRY_SECONDS[0], max_delay=RETRY_SECONDS[-1])
        self._routing.queue = self.queue

    async def _work(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                again = await self._reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: logged, retried with backoff, never kills the worker
                metrics.ERRORS.labels(KINDS.get(key[0], key[0]), "mirror").inc()
                log.exception("status reconcile failed", extra={"resource": f"{key[1]}/{key[2]}"})
                again = -1.0
            finally:
                self.queue.done(key)
            if again is None:
                self.queue.forget(key)
            elif again < 0:
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
                self.queue.add_after(key, again)

    # -- one reconcile ------------------------------------------------------------------
    async def _reconcile(self, key: Key) -> float | None:
        """Returns None (done), a delay to look again after, or -1 (retry with backoff)."""
        plural, namespace, name = key
        body = self.bodies.get(key)
        final = self._gone.get(key)
        if final is not None and (body is None or _uid(final) != _uid(body)):
            # Deleted (and perhaps created again since, under another uid): what is known of
            # the old resource goes, and its clean-up runs before anything of a new one.
            await self._drop(key)
            try:
                await self._finalizer.clean_up(final, running=self._running)
            except (kubeapi.ApiException, OSError) as error:
                log.info("clean-up after deletion failed; will retry",
                         extra={"resource": f"{namespace}/{name}", "error": str(error)[:300]})
                return -1.0
            if _uid(self._gone.get(key)) == _uid(final):
                self._gone.pop(key, None)
            body = self.bodies.get(key)
        if body is None:
            await self._drop(key)
            return None
        kind = KINDS[plural]
        hooks = self.hooks[plural]
        spec = dict(body.get("spec") or {})
        generation = body["metadata"].get("generation")
        entry = self.entries.get(key)
        if entry is not None and entry.uid != _uid(body):  # a deletion the watch never showed
            await self._drop(key)
            entry = None
        if entry is not None and (entry.spec != spec or entry.generation != generation):
            if entry.spec != spec:  # a new backend, timings or limit: re-open the mirror
                await self._close(entry, key)
            entry.spec, entry.generation = spec, generation
            entry.backend = BackendSpec.from_spec(spec, namespace=namespace)
        if entry is None:
            conditions = list((body.get("status") or {}).get("conditions") or [])
            entry = Entry(spec, generation, BackendSpec.from_spec(spec, namespace=namespace),
                           StatusWriter(kind, key), conditions, foreign=list(self._handler_foreign.get(key, [])),
                           pending=list(self._handler_pending.get(key, [])), uid=_uid(body))
            self.entries[key] = entry
            metrics.MIRRORED.labels(kind).inc()
        reconciled = self.reconciled.get(key, -1) == generation
        if not reconciled:
            # A create, a spec change or the first sight since the operator started: write
            # the backing objects and client access first. No status before that, so the
            # first one written on the happy path is the Ready one (one status write per
            # created resource); a failure is reported (Ready=False, Reconciling) and retried.
            reconciled = await self._write_spec(key, body, generation)
            if key not in self.bodies:  # deleted meanwhile
                await self._drop(key)
                return None
        if entry.mirror is None:
            try:
                entry.coordinator = await connections.acquire(entry.backend)
            except CoordinationError as error:
                return await self._unreachable(key, entry, error)
            try:
                entry.mirror = await asyncio.to_thread(hooks.factory, entry.coordinator, body, self._waker(key))
                entry.routes = await self._routing.route(key, entry.mirror, entry.coordinator)
            except CoordinationError as error:
                await self._close(entry, key)
                return await self._unreachable(key, entry, error)
        assert entry.mirror is not None and entry.coordinator is not None
        changed_at = self._routing.take_changed(key)
        try:
            if entry.mirror.blocking:
                snapshot = await asyncio.to_thread(entry.mirror.snapshot)
            else:
                snapshot = entry.mirror.snapshot()  # reads of the watch caches: no request, no wait
        except CoordinationError as error:
            return await self._unreachable(key, entry, error)
        if changed_at is not None and (snapshot.changed_at is None or changed_at < snapshot.changed_at):
            snapshot.changed_at = changed_at
        entry.failures = 0
        if key not in self.bodies:  # deleted while we read: write nothing, re-create nothing
            await self._drop(key)
            return None
        again: float | None = None
        if entry.backend.backend == "kubernetes" and reconciled:
            missing = not self.all_cached(key, entry)
            entry.cached_once = entry.cached_once or not missing
            if missing or entry.foreign or entry.pending:
                ensured = float("-inf") if entry.cached_once else self._ensured_at.get(key, float("-inf"))
                since = time.monotonic() - max(entry.last_repair, ensured)
                if since < REPAIR_GRACE_SECONDS:
                    # The create/update handler has just written them: the watch has not
                    # shown them yet. Look again after the grace, without a request now.
                    again = REPAIR_GRACE_SECONDS - since
                elif since >= REPAIR_SECONDS:
                    entry.last_repair = time.monotonic()
                    foreign = await self._repair(key, entry)
                    if foreign != entry.foreign:
                        # What is withheld from the clients changed: write the grants again.
                        self.reconciled.pop(key, None)
                        self.queue.add(key)
                    entry.foreign = foreign
                if (missing or entry.pending) and not entry.foreign and again is None:
                    again = REPAIR_SECONDS  # until the watch shows the re-created object
        if snapshot.recheck_in is not None:
            again = snapshot.recheck_in if again is None else min(again, snapshot.recheck_in)
        status = compose(kind, entry, snapshot, reconciled, generation, failure=self._failed.get(key),
                         unconfined=self.unconfined.get(key))
        if key not in self.bodies:
            await self._drop(key)
            return None
        written = await entry.writer.write(status)
        if snapshot.changed_at is not None:
            metrics.STATUS_LAG.labels(kind).observe(time.monotonic() - snapshot.changed_at)
        resource = LiveResource(body=body, backend=entry.backend, mirror=entry.mirror, coordinator=entry.coordinator)
        for notice in snapshot.notices:
            resource.post(notice)
        if hooks.after_snapshot is not None:
            try:
                await hooks.after_snapshot(resource, snapshot)
            except (CoordinationError, kubeapi.ApiException, OSError) as error:
                metrics.ERRORS.labels(kind, "mirror").inc()
                # 404/409: an object went or changed meanwhile (a member left, a Lease was
                # deleted and is being re-created): normal operation, retried next change.
                race = getattr(error, "status", None) in (404, 409)
                log.log(logging.INFO if race else logging.WARNING, "after-snapshot step failed",
                        extra={"kind": kind, "resource": name, "status_code": getattr(error, "status", None),
                               "error": str(error)[:500]})
                again = -1.0
        if not written or not reconciled:
            return -1.0
        return again

    async def _unreachable(self, key: Key, entry: Entry, error: Exception) -> float:
        metrics.ERRORS.labels(KINDS[key[0]], "mirror").inc()
        conditions = unreachable(entry, error)
        if key in self.bodies:
            await entry.writer.write({"conditions": conditions})
        delay = RETRY_SECONDS[min(entry.failures, len(RETRY_SECONDS) - 1)]
        entry.failures += 1
        return delay

    def all_cached(self, key: Key, entry: Entry) -> bool:
        body = self.bodies.get(key)
        coordinator = entry.coordinator
        return body is not None and isinstance(coordinator, ObjectCache) and backing.cached_and_owned(
            body, coordinator.observed
        )

    async def _repair(self, key: Key, entry: Entry) -> list[str]:
        """Re-create deleted backing objects; the names of same-named objects that are not ours."""
        body = self.bodies.get(key)
        if body is None:
            return []
        last_state = entry.coordinator.last_state if isinstance(entry.coordinator, ObjectCache) else None
        try:
            # The garbage collector may see a deletion before our watch does (and delete the
            # backing objects, which is what made them missing): ask the API whether the
            # resource still exists, with this uid, before re-creating anything for it.
            if not await _exists(key, body["metadata"].get("uid")):
                log.info("not repairing a deleted resource", extra={"resource": f"{key[1]}/{key[2]}"})
                return entry.foreign
            ensured = await backing.ensure_owned(body, last_state, alive=lambda: key in self.bodies)
        except (kubeapi.ApiException, OSError) as error:
            log.info("drift check failed", extra={"resource": f"{key[1]}/{key[2]}", "error": str(error)[:300]})
            return entry.foreign
        if ensured.created:
            log.info("re-created deleted backing objects", extra={"resource": f"{key[1]}/{key[2]}",
                                                                   "objects": ensured.created})
        if ensured.pending and not entry.pending:
            log.info("waiting for an earlier resource's objects to be collected",
                     extra={"resource": f"{key[1]}/{key[2]}", "objects": ensured.pending})
        entry.pending = ensured.pending
        return ensured.foreign

    def foreign(self, key: Key) -> list[str]:
        """Same-named backing objects the operator did not create (as the last check found)."""
        entry = self.entries.get(key)
        return list(entry.foreign) if entry is not None else []

    def _waker(self, key: Key) -> Callable[[], None]:
        queue = self.queue

        def wake() -> None:
            queue.add_threadsafe(key)

        return wake

    async def _close(self, entry: Entry, key: Key | None = None) -> None:
        mirror, entry.mirror = entry.mirror, None
        coordinator = entry.coordinator
        if entry.routes and coordinator is not None:
            self._routing.unroute(key, entry.routes, coordinator)
            entry.routes = []
        try:
            if mirror is not None and mirror.blocking:
                await asyncio.to_thread(mirror.close)
            elif mirror is not None:
                mirror.close()
        finally:
            if coordinator is not None:
                await connections.release(entry.backend)
            entry.coordinator = None

    async def _drop(self, key: Key) -> None:
        entry = self.entries.pop(key, None)
        self.reconciled.pop(key, None)
        self._handler_foreign.pop(key, None)
        self._handler_pending.pop(key, None)
        self.applied.pop(key, None)
        self.granted.pop(key, None)
        self.unconfined.pop(key, None)
        self._ensured_at.pop(key, None)
        self._failed.pop(key, None)
        self._routing.take_changed(key)
        self.queue.discard(key)
        if entry is None:
            return
        metrics.MIRRORED.labels(KINDS[key[0]]).dec()
        metrics.forget(key[1], key[2])
        await self._close(entry, key)

    def __len__(self) -> int:
        return len(self.entries)


async def _exists(key: Key, uid: str | None) -> bool:
    """Whether the API still has the resource ``key`` with ``uid``, not being deleted."""
    metadata = await live_metadata(key) or {}
    return bool(metadata.get("uid") == uid and not metadata.get("deletionTimestamp"))


controller = StatusController()
"""The operator process's controller (started and stopped by kopf's startup and cleanup)."""


def _uid(body: dict[str, Any] | None) -> str | None:
    """A resource body's uid (None: no body): what tells a re-created resource from the old one."""
    uid = None if body is None else (body.get("metadata") or {}).get("uid")
    return None if uid is None else str(uid)
