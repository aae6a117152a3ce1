"""Event routing of owned objects: which resources a Lease's or a store ConfigMap's watch
event wakes (controller-runtime's "watch owned objects, enqueue the owner").

A resource whose status is read from the backend's shared caches names the objects it
reads (its mirror's ``routes``); ``route`` registers them in the index (controller.owners)
and, once per coordinator, subscribes to that coordinator's object watch. An event then
enqueues every resource whose routes name the object, and remembers when it first woke
each one since its last reconcile (``take_changed``: the status lag's start).

Guarantees: the watch callback does dict lookups and a hand-over to the loop, nothing
more (it runs on the backend's watch thread); one subscription per coordinator, ended
when the last resource routed through it is unrouted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.capabilities import ObjectChange, StateCache
from kubecoord.operator.controller.owners import Key, RouteIndex
from kubecoord.operator.controller.workqueue import WorkQueue
from kubecoord.operator.mirror import Mirror, Route


class ObjectRouting:
    """The route index, the object watches it is fed by, and when each resource was woken."""

    def __init__(self, queue: WorkQueue[Key]) -> None:
        self.queue = queue
        """Where woken resources go (the controller's; replaced with it on a restart)."""
        self._index = RouteIndex()
        self._watches: dict[int, tuple[Callable[[], None], int]] = {}
        """id(coordinator) -> (the unsubscribe of its object watch, cached mirrors using it)."""
        self._changed: dict[Key, float] = {}
        """When an object event first woke a resource since its last reconcile (monotonic)."""

    async def route(self, key: Key, mirror: Mirror, coordinator: Coordinator) -> list[Route]:
        """Wake ``key`` on the events of the objects ``mirror`` reads; the routes registered
        (none for a handle's mirror, which its listeners wake)."""
        routes = mirror.routes()
        if not routes:
            return []
        assert isinstance(coordinator, StateCache)
        watch = self._watches.get(id(coordinator))
        if watch is None:
            on_change = self._on_object_change(key[1])
            unsubscribe = await asyncio.to_thread(coordinator.watch_objects, on_change)
            watch = self._watches.get(id(coordinator))
            if watch is not None:  # another worker subscribed meanwhile
                unsubscribe()
            else:
                watch = (unsubscribe, 0)
        self._watches[id(coordinator)] = (watch[0], watch[1] + 1)
        self._index.add(key, routes)
        return routes

    def unroute(self, key: Key | None, routes: list[Route], coordinator: Coordinator) -> None:
        """Undo ``route``: the coordinator's watch ends with its last routed resource."""
        if key is not None:
            self._index.remove(key, routes)
        watch = self._watches.get(id(coordinator))
        if watch is not None and watch[1] > 1:
            self._watches[id(coordinator)] = (watch[0], watch[1] - 1)
        elif watch is not None:
            del self._watches[id(coordinator)]
            watch[0]()

    def take_changed(self, key: Key) -> float | None:
        """When an object event first woke ``key`` since the last call (None: none did)."""
        return self._changed.pop(key, None)

    def _on_object_change(self, namespace: str) -> ObjectChange:
        index, changed, queue = self._index, self._changed, self.queue

        def on_change(plural: str, name: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            # The watch thread: dict lookups and a hand-over to the loop, nothing more.
            keys = index.lookup(namespace, plural, name, old, new)
            if keys:
                now = time.monotonic()
                for key in keys:
                    changed.setdefault(key, now)
                    queue.add_threadsafe(key)

        return on_change
