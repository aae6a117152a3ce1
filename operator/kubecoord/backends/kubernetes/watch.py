"""An informer: one list+watch of one resource type and selector, shared by every handle
of a coordinator that needs it, with a cache of what was observed and when.

Protocol (the Kubernetes list/watch contract, as client-go's reflector follows it):

1. LIST with the selector; the list's resourceVersion is where the watch starts.
2. WATCH from the last resourceVersion seen (bookmarks included); when the server ends
   the stream (timeoutSeconds, a restart) watch again from there.
3. On 410 Gone (the version was compacted away) LIST again and deliver the difference
   between the cache and the new list as changes — objects deleted meanwhile come out as
   deletions, unchanged ones produce nothing.
4. On network errors retry with backoff; the cache keeps serving what was last observed.

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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubecoord import metrics
from kubecoord._internal.clock import Clock
from kubecoord.backends.kubernetes.client import Gone, KubeClient, Resource
from kubecoord.errors import CoordinationError

log = logging.getLogger("kubecoord.kubernetes.watch")

WATCH_TIMEOUT_SECONDS = 60
BACKOFF_MAX = 2.0


@dataclass(frozen=True, slots=True)
class Observed:
    """One version of an object as this process observed it."""

    obj: dict[str, Any]
    version: str
    seen_at: float


Change = tuple[str, "Observed | None", "Observed | None"]
"""(object name, previous observation or None, new observation or None for deleted)."""
Subscriber = Callable[[list[Change]], None]


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
        self._forgotten: dict[str, str] = {}
        self._pending: collections.deque[Change] = collections.deque()
        self._subscribers: list[Subscriber] = []
        self._last_rv = ""
        self._started = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None
        self.relists = 0

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

    def subscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    # -- feeding the cache from our own requests ----------------------------------------
    def offer(self, obj: dict[str, Any]) -> Observed | None:
        """Apply an object returned by a write or a GET, unless the watch is already past it.

        Returns the cached observation of that object afterwards.
        """
        name, version = object_name(obj), resource_version(obj)
        with self._lock:
            if newer(version, self._last_rv) or name not in self._cache:
                self._apply(name, obj, version)
            observed = self._cache.get(name)
        self._drain()
        return observed

    def forget(self, name: str) -> None:
        """Drop ``name`` after this process deleted it; older watch events do not bring it back."""
        with self._lock:
            previous = self._cache.pop(name, None)
            if previous is not None:
                self._forgotten[name] = previous.version
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
                self._forgotten[name] = previous.version
                self._pending.append((name, previous, None))
        self._drain()
        return None

    # -- applying changes (caller holds self._lock) --------------------------------------
    def _apply(self, name: str, obj: dict[str, Any] | None, version: str) -> None:
        previous = self._cache.get(name)
        if obj is None:
            self._forgotten.pop(name, None)
            if previous is not None and (not version or newer(version, previous.version)):
                del self._cache[name]
                self._pending.append((name, previous, None))
            return
        forgotten = self._forgotten.get(name)
        if forgotten is not None:
            if not newer(version, forgotten):
                return
            del self._forgotten[name]
        if previous is not None and not newer(version, previous.version):
            return
        observed = Observed(obj, version, self._clock.now())
        self._cache[name] = observed
        self._pending.append((name, previous, observed))

    def _drain(self) -> None:
        with self._deliver_lock:
            while True:
                with self._lock:
                    if not self._pending:
                        return
                    batch = list(self._pending)
                    self._pending.clear()
                    subscribers = list(self._subscribers)
                for subscriber in subscribers:
                    try:
                        subscriber(batch)
                    except Exception:  # an internal subscriber bug must not stop the watch
                        log.exception("informer subscriber failed", extra={"informer": self.description})

    def _wanted(self, obj: dict[str, Any]) -> bool:
        return self._name is None or object_name(obj) == self._name

    def _relist(self) -> None:
        items, version = self._client.list(
            self._resource, label_selector=self._label_selector, field_selector=self._field_selector
        )
        with self._lock:
            fresh = {object_name(obj): obj for obj in items if self._wanted(obj)}
            for name in list(self._cache):
                if name not in fresh:
                    previous = self._cache.pop(name)
                    self._pending.append((name, previous, None))
            self._forgotten.clear()
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
                except CoordinationError as exc:
                    failures += 1
                    self._pause(failures, exc)
            except CoordinationError as exc:
                failures += 1
                metrics.watch_restarted("kubernetes", self._resource.plural)
                self._pause(failures, exc)

    def _watch_once(self) -> None:
        started = time.monotonic()
        events = 0
        with self._lock:
            since = self._last_rv
        stream = self._client.watch(
            self._resource, resource_version=since, label_selector=self._label_selector,
            field_selector=self._field_selector, timeout_seconds=self._watch_timeout,
        )
        self._stream = stream
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
                self._apply(object_name(obj), None, version)
            if version and newer(version, self._last_rv):
                self._last_rv = version
        self._drain()

    def _pause(self, failures: int, exc: Exception) -> None:
        if self._stopped.is_set():
            return  # stop() broke the stream on purpose
        delay = min(BACKOFF_MAX, 0.1 * 2 ** min(failures, 5))
        log.info("watch failed; retrying", extra={"informer": self.description, "error": str(exc), "delay": delay})
        self._stopped.wait(delay)


class InformerPool:
    """A coordinator's informers, one per (resource, selector), shared by reference count."""

    def __init__(self, client: KubeClient, clock: Clock) -> None:
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._informers: dict[tuple[str, str | None, str | None], tuple[Informer, int]] = {}

    def acquire(self, resource: Resource, *, label_selector: str | None = None, name: str | None = None) -> Informer:
        key = (resource.plural, label_selector, name)
        with self._lock:
            informer, count = self._informers.get(key) or (
                Informer(self._client, resource, clock=self._clock, label_selector=label_selector, name=name),
                0,
            )
            self._informers[key] = (informer, count + 1)
            return informer

    def release(self, informer: Informer) -> None:
        with self._lock:
            for key, (held, count) in list(self._informers.items()):
                if held is informer:
                    if count <= 1:
                        del self._informers[key]
                        informer.stop()
                    else:
                        self._informers[key] = (held, count - 1)
                    return

    def stop_all(self) -> None:
        with self._lock:
            informers = [informer for informer, _ in self._informers.values()]
            self._informers.clear()
        for informer in informers:
            informer.stop()
