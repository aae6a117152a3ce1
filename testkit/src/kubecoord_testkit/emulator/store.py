"""Object storage with one global resourceVersion and a bounded event history.

Guarantees:
- Every write (create, update, final delete) takes the next value of one global counter
  as its resourceVersion, like etcd's revision; lists report the counter at the time
  of the list, so a watch from a list's resourceVersion sees every later change exactly
  once, in order.
- Stored objects are never mutated after they are stored: writers build a new dict.
- The history keeps the most recent ``history_limit`` events. ``compact()`` forgets all
  of it; a watch from a resourceVersion older than the oldest retained event answers 410.
- Every write offers its event to the registered watchers before it returns, so a watch
  never misses an event committed after it was registered; the event reaches the
  watcher's queue on the event loop's next turn, after the writer's response is sent.

Not guaranteed: durability (everything is in memory) and per-resource history (a single
history is shared by every resource, as etcd's is).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubecoord_testkit.emulator import status

JSON = dict[str, Any]
Key = tuple[str, str]  # (group, plural)
Predicate = Callable[[JSON], bool]


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    key: Key
    obj: JSON
    old: JSON | None


def _with_rv(obj: JSON, rv: int) -> JSON:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}


@dataclass(eq=False)
class Watcher:
    """One open watch: its filter and the queue its stream reads from."""

    key: Key
    namespace: str | None
    predicate: Predicate
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[tuple[str, JSON] | None] = field(default_factory=asyncio.Queue)

    pending: int = 0  # events offered but not yet in the queue

    def _push(self, item: tuple[str, JSON] | None) -> None:
        # Delivered on the loop's next turn, not inside the write: the writer's response
        # goes out before watchers see the event, as with the API server's watch cache.
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop:
            self.loop.call_soon_threadsafe(self._push, item)
            return
        self.pending += 1
        self.loop.call_soon(self._deliver, item)

    def _deliver(self, item: tuple[str, JSON] | None) -> None:
        self.pending -= 1
        self.queue.put_nowait(item)

    def settled(self) -> bool:
        """Whether every event offered so far is in the queue and read: then the watcher
        has seen everything up to the store's resourceVersion (bookmarks rely on it)."""
        return self.pending == 0 and self.queue.empty()

    def offer(self, event: Event) -> None:
        """Translate a stored event for this watcher's selectors, as the watch cache does:
        an object that starts matching is ADDED, one that stops matching is DELETED."""
        if event.key != self.key:
            return
        namespace = event.obj["metadata"].get("namespace")
        if self.namespace is not None and namespace != self.namespace:
            return
        now = self.predicate(event.obj)
        before = event.old is not None and self.predicate(event.old)
        if event.type == "ADDED" and now:
            self._push(("ADDED", event.obj))
        elif event.type == "DELETED" and now:
            self._push(("DELETED", event.obj))
        elif event.type == "MODIFIED":
            if now and before:
                self._push(("MODIFIED", event.obj))
            elif now:
                self._push(("ADDED", event.obj))
            elif before and event.old is not None:
                self._push(("DELETED", _with_rv(event.old, event.rv)))

    def close(self) -> None:
        self._push(None)


class Store:
    def __init__(self, *, history_limit: int = 100_000) -> None:
        self._lock = threading.RLock()
        self._rv = 0
        self._objects: dict[Key, dict[tuple[str, str], JSON]] = {}
        self._uids: dict[str, tuple[Key, str, str]] = {}
        self._history: deque[Event] = deque()
        self._history_limit = history_limit
        self._floor = 0  # every event with rv > floor is still in the history
        self._watchers: set[Watcher] = set()

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def get(self, key: Key, namespace: str, name: str) -> JSON | None:
        with self._lock:
            return self._objects.get(key, {}).get((namespace, name))

    def select(self, key: Key, namespace: str | None = None) -> tuple[list[JSON], int]:
        """Objects sorted by (namespace, name), and the resourceVersion of that snapshot."""
        with self._lock:
            items = sorted(self._objects.get(key, {}).items())
            return [obj for (ns, _), obj in items if namespace is None or ns == namespace], self._rv

    def snapshot(self, key: Key, namespace: str | None, rv: int) -> list[JSON]:
        """The objects as they were at ``rv``, rebuilt by undoing the retained events after
        it (410 when they are no longer retained)."""
        with self._lock:
            self.check_not_expired(rv)
            objects = {
                (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in self.select(key, namespace)[0]
            }
            for event in reversed(self._history):
                if event.rv <= rv:
                    break
                if event.key != key:
                    continue
                meta = event.obj["metadata"]
                where = (meta.get("namespace", ""), meta["name"])
                if namespace is not None and where[0] != namespace:
                    continue
                if event.type == "ADDED" or event.old is None:
                    objects.pop(where, None)
                else:
                    objects[where] = event.old
            return [objects[where] for where in sorted(objects)]

    def resource_keys(self) -> list[Key]:
        with self._lock:
            return list(self._objects)

    def by_uid(self, uid: str) -> JSON | None:
        with self._lock:
            where = self._uids.get(uid)
            return None if where is None else self.get(*where)

    def all_objects(self) -> Iterator[tuple[Key, JSON]]:
        with self._lock:
            snapshot = [(key, obj) for key, objs in self._objects.items() for obj in objs.values()]
        yield from snapshot

    def write(self, key: Key, obj: JSON) -> JSON:
        """Create or replace ``obj`` (a fresh dict), giving it the next resourceVersion."""
        with self._lock:
            self._rv += 1
            meta = obj["metadata"]
            meta["resourceVersion"] = str(self._rv)
            where = (meta.get("namespace", ""), meta["name"])
            objects = self._objects.setdefault(key, {})
            old = objects.get(where)
            objects[where] = obj
            self._uids[meta["uid"]] = (key, *where)
            self._record(Event(self._rv, "MODIFIED" if old else "ADDED", key, obj, old))
            return obj

    def remove(self, key: Key, namespace: str, name: str) -> JSON | None:
        """Delete for good; the DELETED event carries the last state at a new resourceVersion."""
        with self._lock:
            old = self._objects.get(key, {}).pop((namespace, name), None)
            if old is None:
                return None
            self._rv += 1
            self._uids.pop(old["metadata"]["uid"], None)
            last = _with_rv(old, self._rv)
            self._record(Event(self._rv, "DELETED", key, last, old))
            return last

    def _record(self, event: Event) -> None:
        self._history.append(event)
        while len(self._history) > self._history_limit:
            self._floor = self._history.popleft().rv
        for watcher in list(self._watchers):
            watcher.offer(event)

    def compact(self) -> None:
        with self._lock:
            self._history.clear()
            self._floor = self._rv

    def check_not_expired(self, rv: int) -> None:
        with self._lock:
            if rv < self._floor:
                raise status.gone(f"too old resource version: {rv} ({self._floor + 1})")

    def watch(
        self,
        key: Key,
        namespace: str | None,
        predicate: Predicate,
        since: int | None,
        loop: asyncio.AbstractEventLoop,
    ) -> Watcher:
        """Register a watcher, first replaying what it asked for: the events after
        ``since``, or (``since`` None) the current objects as ADDED."""
        with self._lock:
            watcher = Watcher(key, namespace, predicate, loop)
            if since is None:
                objects, _ = self.select(key, namespace)
                for obj in objects:
                    if predicate(obj):
                        watcher.queue.put_nowait(("ADDED", obj))
            else:
                self.check_not_expired(since)
                for event in self._history:
                    if event.rv > since:
                        watcher.offer(event)
            self._watchers.add(watcher)
            return watcher

    def unwatch(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def watchers(self) -> list[Watcher]:
        with self._lock:
            return list(self._watchers)
