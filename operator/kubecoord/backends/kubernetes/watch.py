"""An informer: one list+watch of one resource type and selector, shared by every handle
of a coordinator that needs it, with a cache of what was observed and when.

Protocol (the Kubernetes list/watch contract, as client-go's reflector follows it):

1. LIST with the selector; the list's resourceVersion is where the watch starts.
2. WATCH from the last resourceVersion seen (bookmarks included); when the server ends
   the stream (timeoutSeconds, a restart) watch again from there.
3. On 410 Gone (the version was compacted away) LIST again and deliver the difference
   between the cache and the new list as changes — objects deleted meanwhile come out as
   deletions, unchanged ones produce nothing, and objects this process already holds at a
   version newer than the list (its own writes) are kept: the watch from the list brings
   their later changes.
4. On network errors, and on any unexpected exception, retry with jittered exponential
   backoff; the watch thread never dies while the informer runs. The cache keeps serving
   what was last observed.
5. Dead watches: a stream that stays silent for much longer than its usual gap between
   events (bookmarks included) is closed and re-opened from the last resourceVersion by a
   process-wide watchdog (one thread), without a re-list. An idle watch has no usual gap
   and is only re-opened when the server ends it (``timeoutSeconds``, jittered) or the
   read timeout passes. (kube-apiserver 1.32 sends a bookmark on an idle watch only once a
   minute and about two seconds before the watch's timeoutSeconds deadline, so silence
   alone cannot tell an idle watch from a dead one within a minute.)

Deletions leave tombstones: an object's response from an earlier GET or write (offer) is
never applied once this informer has seen the object deleted at a later version, nor when
the watch has already moved past that version without showing the object (it was
deleted, or left the selection, since).

Guarantees: subscribers get every change of an object exactly once per resourceVersion,
in the order the informer applied them — nothing lost or duplicated between list and
watch, nor between a write's own response (offer()) and the watch event for it. Each
cached object carries ``seen_at``: the local monotonic time when this process first
observed that version; expiry judgements (election, members) are made from it.

Ordering of versions compares resourceVersions as integers when both are numeric (as
etcd's revisions are) and otherwise trusts arrival order.

Subscribers run on whichever thread applied the change (the watch thread, or a writer
offering its response), one at a time, in order; they must be quick and must not call
back into the informer (they only record state and wake threads).
Not guaranteed: freshness — the cache lags the server by the watch's latency, and by a
lot while the API server is unreachable.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubecoord import metrics
from kubecoord._internal.clock import Clock
from kubecoord.backends.kubernetes.client import Gone, KubeClient, Resource
from kubecoord.errors import CoordinationError

log = logging.getLogger("kubecoord.kubernetes.watch")

WATCH_TIMEOUT_SECONDS = 60
"""Server-side timeoutSeconds of one watch request, stretched by up to 25 % at random so
that many informers do not reconnect in step (client-go jitters its timeout likewise)."""
BACKOFF_MAX = 2.0
MAX_TOMBSTONES = 1024
LAST_STATES = 1024
SILENCE_FACTOR = 6.0
"""A stream is dead after this many usual gaps between its events without one."""
MIN_SILENCE = 2.0
"""...and never before this many seconds (a loaded machine delays events)."""


@dataclass(frozen=True, slots=True)
class Observed:
    """One version of an object as this process observed it."""

    obj: dict[str, Any]
    version: str
    seen_at: float


Change = tuple[str, "Observed | None", "Observed | None"]
"""(object name, previous observation or None, new observation or None for deleted)."""
Subscriber = Callable[[list[Change]], None]
Route = tuple[str, ...]
"""("name", NAME) or ("label", KEY, VALUE): what a routed subscriber is given."""


def _labels(observed: Observed | None) -> set[tuple[str, str]]:
    if observed is None:
        return set()
    labels = (observed.obj.get("metadata") or {}).get("labels") or {}
    return {(str(key), str(value)) for key, value in labels.items()} if isinstance(labels, dict) else set()


def resource_version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def object_name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def newer(candidate: str, than: str) -> bool:
    """Whether resourceVersion ``candidate`` is later than ``than`` (see module docstring)."""
    if not than:
        return True
    if candidate.isdigit() and than.isdigit():
        return int(candidate) > int(than)
    return candidate != than


STOP_JOIN_TIMEOUT = 5.0
"""Seconds stop() waits for the watch thread to end."""


class Informer:
    """A shared list+watch cache of ``resource`` objects matching a selector."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        clock: Clock,
        label_selector: str | None = None,
        name: str | None = None,
        watch_timeout: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self._client = client
        self._resource = resource
        self._clock = clock
        self._label_selector = label_selector
        self._name = name
        self._field_selector = f"metadata.name={name}" if name else None
        self._watch_timeout = watch_timeout
        self._lock = threading.Lock()  # the cache and the pending changes
        self._deliver_lock = threading.Lock()  # one delivery at a time, in order
        self._cache: dict[str, Observed] = {}
        self._tombstones: dict[str, str] = {}
        """name -> resourceVersion at (or after) which this informer saw it deleted."""
        self._final: dict[str, dict[str, Any]] = {}
        """name -> the object as last seen before it was deleted (the DELETED event's final
        state), for the newest LAST_STATES deleted names: what an owner re-creates it from."""
        self._pending: collections.deque[Change] = collections.deque()
        self._subscribers: list[Subscriber] = []
        self._routed: dict[Route, list[Subscriber]] = {}
        """Subscribers of one object name or one label value: given only their changes."""
        self._labelled: dict[tuple[str, str], set[str]] = {}
        """(label key, value) -> names of the cached objects carrying it."""
        self._last_rv = ""
        self._started = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None
        self._heard_at = 0.0  # time.monotonic() of the stream's last event (or its opening)
        self._gap: float | None = None  # smoothed seconds between the stream's events
        self.relists = 0
        self.silent_restarts = 0

    @property
    def description(self) -> str:
        return f"{self._resource.plural}[{self._label_selector or self._field_selector or '*'}]"

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """List synchronously (raising translated errors), then watch on a thread. Idempotent."""
        with self._lock:
            if self._started:
                return
        self._relist()
        with self._lock:
            if self._started:
                return
            self._started = True
        self._thread = threading.Thread(target=self._run, name=f"kubecoord-watch-{self.description}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the cache stays readable). Idempotent."""
        self._stopped.set()
        watchdog.unwatch(self)
        stream = self._stream
        if stream is not None:
            stream.close()
        # Wait for the thread to notice: a daemon thread still inside the client when
        # the interpreter finalizes can abort the process (SIGABRT at exit).
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_JOIN_TIMEOUT)

    # -- reading ------------------------------------------------------------------------
    def get(self, name: str) -> Observed | None:
        with self._lock:
            return self._cache.get(name)

    def items(self) -> dict[str, Observed]:
        with self._lock:
            return dict(self._cache)

    def last_state(self, name: str) -> dict[str, Any] | None:
        """``name`` as cached, else as it was when this informer saw it deleted; None when
        never seen (or forgotten: only the newest LAST_STATES deletions are kept)."""
        with self._lock:
            cached = self._cache.get(name)
            return cached.obj if cached is not None else self._final.get(name)

    def _remember(self, name: str, final: dict[str, Any]) -> None:
        self._final.pop(name, None)
        self._final[name] = final
        while len(self._final) > LAST_STATES:
            del self._final[next(iter(self._final))]

    def labelled(self, key: str, value: str) -> dict[str, Observed]:
        """The cached objects whose label ``key`` is ``value`` (indexed: no scan)."""
        with self._lock:
            return {name: self._cache[name] for name in self._labelled.get((key, value), ())}

    def subscribe(self, subscriber: Subscriber, *, route: Route | None = None) -> None:
        """Deliver every change, or with ``route`` only those of one name / label value."""
        with self._lock:
            if route is None:
                self._subscribers.append(subscriber)
            else:
                self._routed.setdefault(route, []).append(subscriber)

    def unsubscribe(self, subscriber: Subscriber, *, route: Route | None = None) -> None:
        with self._lock:
            listed = self._subscribers if route is None else self._routed.get(route, [])
            if subscriber in listed:
                listed.remove(subscriber)
            if route is not None and not listed:
                self._routed.pop(route, None)

    # -- feeding the cache from our own requests ----------------------------------------
    def offer(self, obj: dict[str, Any]) -> Observed | None:
        """Apply an object returned by a write or a GET, unless the watch is already past it.

        Returns the cached observation of that object afterwards.
        """
        name, version = object_name(obj), resource_version(obj)
        with self._lock:
            # Not cached and not newer than the watch: deleted (or gone from the selection)
            # since, and the watch already told us; _apply checks the tombstones.
            if name in self._cache or newer(version, self._last_rv):
                self._apply(name, obj, version)
            observed = self._cache.get(name)
        self._drain()
        return observed

    def forget(self, name: str) -> None:
        """Drop ``name`` after this process deleted it; older watch events do not bring it back."""
        with self._lock:
            previous = self._cache.pop(name, None)
            if previous is not None:
                self._index(name, previous, None)
                self._remember(name, previous.obj)
                self._bury(name, previous.version)
                self._pending.append((name, previous, None))
        self._drain()

    def refresh(self, name: str, *, timeout: float | None = None) -> Observed | None:
        """GET ``name`` now and fold it into the cache; returns the current observation."""
        obj = self._client.get(self._resource, name, timeout=timeout)
        if obj is not None:
            return self.offer(obj)
        with self._lock:
            previous = self._cache.get(name)
            if previous is not None and not newer(previous.version, self._last_rv):
                # The watch has not caught up with the deletion yet: the GET is fresher.
                del self._cache[name]
                self._index(name, previous, None)
                self._remember(name, previous.obj)
                self._bury(name, previous.version)
                self._pending.append((name, previous, None))
        self._drain()
        return None

    # -- applying changes (caller holds self._lock) --------------------------------------
    def _apply(
        self, name: str, obj: dict[str, Any] | None, version: str, final: dict[str, Any] | None = None
    ) -> None:
        previous = self._cache.get(name)
        if obj is None:
            if previous is not None and (not version or newer(version, previous.version)):
                del self._cache[name]
                self._index(name, previous, None)
                self._remember(name, final or previous.obj)
                self._pending.append((name, previous, None))
            elif final is not None and previous is None:
                self._remember(name, final)
            self._bury(name, version or (previous.version if previous is not None else ""))
            return
        tombstone = self._tombstones.get(name)
        if tombstone is not None:
            if not newer(version, tombstone):
                return  # an older version of something deleted since: no resurrection
            del self._tombstones[name]
        if previous is not None and not newer(version, previous.version):
            return
        observed = Observed(obj, version, self._clock.now())
        self._cache[name] = observed
        self._index(name, previous, observed)
        self._pending.append((name, previous, observed))

    def _index(self, name: str, old: Observed | None, new: Observed | None) -> None:
        """Keep the label index in step with the cache (caller holds self._lock)."""
        before, after = _labels(old), _labels(new)
        for item in before - after:
            names = self._labelled.get(item)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._labelled[item]
        for item in after - before:
            self._labelled.setdefault(item, set()).add(name)

    def _bury(self, name: str, version: str) -> None:
        """Remember that ``name`` was deleted at ``version`` (caller holds self._lock)."""
        if not version:
            return
        if newer(version, self._tombstones.get(name, "")):
            self._tombstones[name] = version
        if len(self._tombstones) > MAX_TOMBSTONES:
            # Tombstones the watch has moved past are redundant: offer() ignores uncached
            # objects not newer than the watch anyway.
            for buried, at in list(self._tombstones.items()):
                if not newer(at, self._last_rv):
                    del self._tombstones[buried]

    def _drain(self) -> None:
        with self._deliver_lock:
            while True:
                with self._lock:
                    if not self._pending:
                        return
                    batch = list(self._pending)
                    self._pending.clear()
                    deliveries: list[tuple[Subscriber, list[Change]]] = [(s, batch) for s in self._subscribers]
                    if self._routed:
                        deliveries += self._route(batch)
                for subscriber, changes in deliveries:
                    try:
                        subscriber(changes)
                    except Exception:  # an internal subscriber bug must not stop the watch
                        log.exception("informer subscriber failed", extra={"informer": self.description})

    def _route(self, batch: list[Change]) -> list[tuple[Subscriber, list[Change]]]:
        """Each routed subscriber with the changes of its name or label (caller holds self._lock)."""
        routed: dict[int, tuple[Subscriber, list[Change]]] = {}
        for change in batch:
            name, old, new = change
            routes: set[Route] = {("name", name)}
            routes.update(("label", key, value) for key, value in _labels(old) | _labels(new))
            for route in routes:
                for subscriber in self._routed.get(route, ()):
                    routed.setdefault(id(subscriber), (subscriber, []))[1].append(change)
        return list(routed.values())

    def _wanted(self, obj: dict[str, Any]) -> bool:
        return self._name is None or object_name(obj) == self._name

    def _relist(self) -> None:
        items, version = self._client.list(
            self._resource, label_selector=self._label_selector, field_selector=self._field_selector
        )
        with self._lock:
            fresh = {object_name(obj): obj for obj in items if self._wanted(obj)}
            for name in list(self._cache):
                previous = self._cache[name]
                # Absent from the list: deleted meanwhile — unless we hold it at a version
                # newer than the list (our own write after the list was served).
                if name not in fresh and not newer(previous.version, version):
                    del self._cache[name]
                    self._index(name, previous, None)
                    self._remember(name, previous.obj)
                    self._bury(name, version)
                    self._pending.append((name, previous, None))
            for buried, at in list(self._tombstones.items()):
                if not newer(at, version):
                    del self._tombstones[buried]  # the list is newer than the deletion
            for name, obj in fresh.items():
                self._apply(name, obj, resource_version(obj))
            self._last_rv = version
            self.relists += 1
        self._drain()

    # -- the watch thread ----------------------------------------------------------------
    def _run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            try:
                self._watch_once()
                failures = 0
            except Gone:
                log.info("watch too old; re-listing", extra={"informer": self.description})
                metrics.watch_restarted("kubernetes", self._resource.plural)
                try:
                    self._relist()
                    failures = 0
                except Exception as exc:  # retried with backoff, like any failure
                    failures += 1
                    self._pause(failures, exc)
            except CoordinationError as exc:
                failures += 1
                metrics.watch_restarted("kubernetes", self._resource.plural)
                self._pause(failures, exc)
            except Exception as exc:  # a bug or a malformed event must not end watching
                failures += 1
                log.exception("watch failed unexpectedly; retrying", extra={"informer": self.description})
                metrics.watch_restarted("kubernetes", self._resource.plural)
                self._pause(failures, exc)

    def _watch_once(self) -> None:
        started = time.monotonic()
        events = 0
        with self._lock:
            since = self._last_rv
        timeout = int(self._watch_timeout * random.uniform(1.0, 1.25))
        stream = self._client.watch(
            self._resource, resource_version=since, label_selector=self._label_selector,
            field_selector=self._field_selector, timeout_seconds=timeout,
        )
        self._heard(opened=True)
        self._stream = stream
        watchdog.watch(self)
        try:
            if self._stopped.is_set():  # stop() ran while the watch was being opened
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
                return
            for event in stream:
                if self._stopped.is_set():
                    return
                events += 1
                self._heard()
                self._on_event(event)
        finally:
            self._stream = None
        if events == 0 and time.monotonic() - started < 1.0:
            self._stopped.wait(0.2)  # a server that closes watches at once must not spin us

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        version = resource_version(obj)
        with self._lock:
            if kind in ("ADDED", "MODIFIED") and self._wanted(obj):
                self._apply(object_name(obj), obj, version)
            elif kind == "DELETED" and self._wanted(obj):
                self._apply(object_name(obj), None, version, final=obj)
            if version and newer(version, self._last_rv):
                self._last_rv = version
        self._drain()

    # -- dead-watch detection (called by the watchdog thread) -------------------------------
    def _heard(self, *, opened: bool = False) -> None:
        now = time.monotonic()
        if not opened:
            gap = now - self._heard_at
            self._gap = gap if self._gap is None else 0.8 * self._gap + 0.2 * gap
        self._heard_at = now

    def silent_for(self) -> float | None:
        """Seconds the open stream has been silent beyond its allowance, or None if it is fine."""
        stream, gap = self._stream, self._gap
        if stream is None or gap is None or self._stopped.is_set():
            return None
        allowance = max(MIN_SILENCE, SILENCE_FACTOR * gap)
        silent = time.monotonic() - self._heard_at
        return silent - allowance if silent > allowance else None

    def restart_silent(self) -> None:
        """Close a stream that went silent; the watch thread re-opens it from the last version."""
        stream = self._stream
        if stream is None:
            return
        self.silent_restarts += 1
        # A quiet but healthy stream must not be restarted in a loop: the silence just
        # endured becomes the usual gap, so the next allowance is SILENCE_FACTOR times it.
        self._gap = max(2 * (self._gap or 0.0), time.monotonic() - self._heard_at)
        log.info("watch silent; re-opening it", extra={"informer": self.description})
        stream.close()

    def _pause(self, failures: int, exc: Exception) -> None:
        if self._stopped.is_set():
            return  # stop() broke the stream on purpose
        # Full jitter (AWS-style), so that informers failing together do not retry in step.
        delay = min(BACKOFF_MAX, 0.1 * 2 ** min(failures, 5)) * random.uniform(0.5, 1.0)
        log.info("watch failed; retrying", extra={"informer": self.description, "error": str(exc), "delay": delay})
        self._stopped.wait(delay)


class Watchdog:
    """One thread per process that re-opens informers' silent watch streams."""

    INTERVAL = 0.5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._informers: weakref.WeakSet[Informer] = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def watch(self, informer: Informer) -> None:
        with self._lock:
            self._informers.add(informer)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="kubecoord-silence-detector", daemon=True)
                self._thread.start()

    def unwatch(self, informer: Informer) -> None:
        with self._lock:
            self._informers.discard(informer)

    def _run(self) -> None:
        while True:
            time.sleep(self.INTERVAL)
            with self._lock:
                informers = list(self._informers)
                if not informers:  # ends with the last informer; watch() starts it again
                    self._thread = None
                    return
            for informer in informers:
                try:
                    if informer.silent_for() is not None:
                        informer.restart_silent()
                except Exception:  # the watchdog must outlive any one informer's trouble
                    log.exception("watchdog check failed", extra={"informer": informer.description})


watchdog = Watchdog()
