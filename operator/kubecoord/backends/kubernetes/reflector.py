"""The reflector: one list+watch of one resource type and selector, feeding a cache.

Protocol (the Kubernetes list/watch contract, as client-go's reflector follows it):

1. LIST with the selector; the list's resourceVersion is where the watch starts.
2. WATCH from the last resourceVersion seen (bookmarks included); when the server ends
   the stream (timeoutSeconds, a restart) watch again from there.
3. On 410 Gone (the version was compacted away) LIST again; the cache delivers the
   difference between what it held and the new list as changes — objects deleted
   meanwhile come out as deletions, unchanged ones produce nothing, and objects this
   process already holds at a version newer than the list (its own writes) are kept: the
   watch from the list brings their later changes.
4. On network errors, and on any unexpected exception, retry with jittered exponential
   backoff; the watch loop never ends while the reflector runs. The cache keeps
   serving what was last observed.
5. Dead watches: a stream that stays silent for much longer than its usual gap between
   events (bookmarks included) is closed and re-opened from the last resourceVersion by
   the multiplexer's silence check (watch_mux.py), without a re-list. An idle watch has
   no usual gap and is only re-opened when the server ends it (``timeoutSeconds``,
   jittered) or the read timeout passes. (kube-apiserver 1.32 sends a bookmark on an
   idle watch only once a minute and about two seconds before the watch's timeoutSeconds
   deadline, so silence alone cannot tell an idle watch from a dead one within a minute.)

The watch loop is a coroutine on the process's one watch thread (watch_mux.py), not a
thread of its own: opening and reading the stream only ``await``, and re-lists run on
the multiplexer's small pool, so one held or slow stream never delays another's events.
After every list and every event it calls ``on_change`` (the informer delivers what the
cache queued): events on the watch thread, lists on the thread that listed. Not
guaranteed: freshness — the cache lags the server by the watch's latency, and by a lot
while the API server is unreachable.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubecoord import metrics
from kubecoord.backends.kubernetes.cache import ObjectCache, object_name
from kubecoord.backends.kubernetes.client import Gone, KubeClient, Resource, WatchStream
from kubecoord.backends.kubernetes.watch_mux import Running, multiplexer
from kubecoord.errors import CoordinationError

log = logging.getLogger("kubecoord.kubernetes.watch")

WATCH_TIMEOUT_SECONDS = 60
"""Server-side timeoutSeconds of one watch request, stretched by up to 25 % at random so
that many informers do not reconnect in step (client-go jitters its timeout likewise)."""
BACKOFF_MAX = 2.0
SILENCE_FACTOR = 6.0
"""A stream is dead after this many usual gaps between its events without one."""
MIN_SILENCE = 2.0
"""...and never before this many seconds (a loaded machine delays events)."""
STOP_JOIN_TIMEOUT = 5.0
"""Seconds stop() waits for the watch loop to end."""


@dataclass(frozen=True)
class ListWatch:
    """What one reflector lists and watches (client-go's cache.ListWatch): ``resource``
    objects matching a label selector, or the one object called ``name``."""

    client: KubeClient
    resource: Resource
    label_selector: str | None = None
    name: str | None = None

    @property
    def field_selector(self) -> str | None:
        return f"metadata.name={self.name}" if self.name else None

    @property
    def description(self) -> str:
        return f"{self.resource.plural}[{self.label_selector or self.field_selector or '*'}]"

    def list(self) -> tuple[list[dict[str, Any]], str]:
        return self.client.list(self.resource, label_selector=self.label_selector, field_selector=self.field_selector)

    async def watch(self, since: str, timeout_seconds: int) -> WatchStream:
        return await self.client.open_watch(
            self.resource, resource_version=since, label_selector=self.label_selector,
            field_selector=self.field_selector, timeout_seconds=timeout_seconds,
        )

    def wanted(self, obj: dict[str, Any]) -> bool:
        return self.name is None or object_name(obj) == self.name


class Reflector:
    """Lists and watches ``resource`` objects matching a selector into ``cache``."""

    def __init__(
        self, source: ListWatch, cache: ObjectCache, *, on_change: Callable[[], None], watch_timeout: int
    ) -> None:
        self._source = source
        self._plural = source.resource.plural
        self._cache = cache
        self._on_change = on_change
        self._watch_timeout = watch_timeout
        self._lock = threading.Lock()
        self._started = False
        self._stopped = threading.Event()
        self._running: Running | None = None
        self._stream: WatchStream | None = None
        self._heard_at = 0.0  # time.monotonic() of the stream's last event (or its opening)
        self.confirmed_at = float("-inf")
        """time.monotonic() of the latest evidence from the server itself that the cache is
        current: the start of the last successful list, or the receipt of the last watch
        event or bookmark (every earlier event was delivered before it). The opening of a
        watch is not evidence: events the server had queued may still be on their way."""
        self._gap: float | None = None  # smoothed seconds between the stream's events
        self.relists = 0
        self.silent_restarts = 0

    @property
    def description(self) -> str:
        return self._source.description

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """List synchronously (raising translated errors), then watch on the multiplexer. Idempotent."""
        with self._lock:
            if self._started:
                return
        self.relist()
        with self._lock:
            # stop() may have run during the list (a coordinator closed from another
            # thread): a watch started now would outlive it, and nobody would wait for it.
            if self._started or self._stopped.is_set():
                return
            self._started = True
            self._running = multiplexer.run(self, self._run)

    def stop(self) -> None:
        """Stop watching and wait for the watch loop to end. Idempotent."""
        with self._lock:
            self._stopped.set()
            running = self._running
        if running is not None:
            running.cancel(first=self._close_stream)
            # Wait for the loop to notice: a daemon thread still inside a request when the
            # interpreter finalizes can abort the process (SIGABRT at exit).
            running.wait(STOP_JOIN_TIMEOUT)

    def _close_stream(self) -> None:
        """On the loop's thread: end the open stream, so the watch loop sees it end even if
        its cancellation is lost, and then finds itself stopped."""
        stream = self._stream
        if stream is not None:
            stream.close()

    def relist(self) -> None:
        requested = time.monotonic()
        items, version = self._source.list()
        self._cache.replace({object_name(obj): obj for obj in items if self._source.wanted(obj)}, version)
        self.confirmed_at = max(self.confirmed_at, requested)
        self.relists += 1
        self._on_change()

    # -- the watch loop (on the multiplexer's thread) ------------------------------------------
    async def _run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            try:
                await self._watch_once()
                failures = 0
            except Gone:
                log.info("watch too old; re-listing", extra={"informer": self.description})
                metrics.watch_restarted("kubernetes", self._plural)
                try:
                    await asyncio.get_running_loop().run_in_executor(None, self.relist)
                    failures = 0
                except Exception as exc:  # retried with backoff, like any failure
                    failures += 1
                    await self._pause(failures, exc)
            except CoordinationError as exc:
                failures += 1
                metrics.watch_restarted("kubernetes", self._plural)
                await self._pause(failures, exc)
            except Exception as exc:  # a bug or a malformed event must not end watching
                failures += 1
                log.exception("watch failed unexpectedly; retrying", extra={"informer": self.description})
                metrics.watch_restarted("kubernetes", self._plural)
                await self._pause(failures, exc)

    async def _watch_once(self) -> None:
        started = time.monotonic()
        events = 0
        since = self._cache.synced_to()
        timeout = int(self._watch_timeout * random.uniform(1.0, 1.25))
        stream = await self._source.watch(since, timeout)
        if self._stopped.is_set():  # stopped while opening (a lost cancellation): no stream to close later
            stream.close()
            return
        self._heard(opened=True)
        self._stream = stream
        try:
            async for event in stream.events():
                if self._stopped.is_set():
                    return
                events += 1
                self._heard()
                obj = event.get("object") or {}
                self._cache.watched(event.get("type"), obj, selected=self._source.wanted(obj))
                self.confirmed_at = self._heard_at
                self._on_change()
        finally:
            self._stream = None
            stream.close()  # cancelled (stop) or failed: the connection goes with the loop
        if events == 0 and time.monotonic() - started < 1.0:
            await asyncio.sleep(0.2)  # a server that closes watches at once must not spin us

    async def _pause(self, failures: int, exc: Exception) -> None:
        if self._stopped.is_set():
            return  # stop() broke the stream on purpose
        # Full jitter (AWS-style), so that informers failing together do not retry in step.
        delay = min(BACKOFF_MAX, 0.1 * 2 ** min(failures, 5)) * random.uniform(0.5, 1.0)
        log.info("watch failed; retrying", extra={"informer": self.description, "error": str(exc), "delay": delay})
        await asyncio.sleep(delay)

    # -- dead-watch detection (asked by the multiplexer, on its thread) ----------------------
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
        """Close a stream that went silent; the watch loop re-opens it from the last version."""
        stream = self._stream
        if stream is None:
            return
        self.silent_restarts += 1
        # A quiet but healthy stream must not be restarted in a loop: the silence just
        # endured becomes the usual gap, so the next allowance is SILENCE_FACTOR times it.
        self._gap = max(2 * (self._gap or 0.0), time.monotonic() - self._heard_at)
        log.info("watch silent; re-opening it", extra={"informer": self.description})
        stream.close()
