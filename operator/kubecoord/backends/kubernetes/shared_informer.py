"""An informer: one list+watch of one resource type and selector, shared by every handle
of a coordinator that needs it (informers.py says which), with a cache of what was
observed and when.

The parts, as client-go's tools/cache splits them: the cache (cache.py: the objects,
tombstones, the label index and the queue of changes), the reflector (reflector.py: list,
watch, re-list after 410, backoff, dead streams), the one thread that runs every
reflector's watch loop (watch_mux.py), and this module, which joins them and delivers the changes to
subscribers. A handle's own requests feed the cache too: offer() a write's or a GET's
response, forget() what it deleted, refresh() one object by GET.

Guarantees: subscribers get every change of an object exactly once per resourceVersion,
in the order the informer applied them — nothing lost or duplicated between list and
watch, nor between a write's own response (offer()) and the watch event for it. Each
cached object carries ``seen_at``: the local monotonic time when this process first
observed that version; expiry judgements (election, members) are made from it.

Subscribers run on whichever thread applied the change (the watch thread, or a writer
offering its response), one at a time, in order; they must be quick and must not call
back into the informer (they only record state and wake threads).
Not guaranteed: freshness — the cache lags the server by the watch's latency, and by a
lot while the API server is unreachable.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubecoord._internal.clock import Clock
from kubecoord.backends.kubernetes.cache import Change, ObjectCache, Observed, Subscriber, labels_of
from kubecoord.backends.kubernetes.client import KubeClient, Resource
from kubecoord.backends.kubernetes.reflector import WATCH_TIMEOUT_SECONDS, ListWatch, Reflector

log = logging.getLogger("kubecoord.kubernetes.watch")

Route = tuple[str, ...]
"""("name", NAME) or ("label", KEY, VALUE): what a routed subscriber is given."""


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
        self._cache = ObjectCache(clock)
        source = ListWatch(client, resource, label_selector=label_selector, name=name)
        self._reflector = Reflector(source, self._cache, on_change=self._drain, watch_timeout=watch_timeout)
        self._deliver_lock = threading.Lock()  # one delivery at a time, in order
        # Guarded by the cache's lock, so that a batch of changes and its recipients are taken together.
        self._subscribers: list[Subscriber] = []
        self._routed: dict[Route, list[Subscriber]] = {}
        """Subscribers of one object name or one label value: given only their changes."""

    @property
    def description(self) -> str:
        return self._reflector.description

    @property
    def relists(self) -> int:
        return self._reflector.relists

    @property
    def silent_restarts(self) -> int:
        return self._reflector.silent_restarts

    @property
    def confirmed_at(self) -> float:
        """time.monotonic() from which the server vouched for the whole cache (reflector.py)."""
        return self._reflector.confirmed_at

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """List synchronously (raising translated errors), then watch on a thread. Idempotent."""
        self._reflector.start()

    def stop(self) -> None:
        """Stop watching (the cache stays readable). Idempotent."""
        self._reflector.stop()

    # -- reading ------------------------------------------------------------------------
    def get(self, name: str) -> Observed | None:
        return self._cache.get(name)

    def items(self) -> dict[str, Observed]:
        return self._cache.items()

    def last_state(self, name: str) -> dict[str, Any] | None:
        """``name`` as cached, else as it was when this informer saw it deleted (see cache.py)."""
        return self._cache.last_state(name)

    def labelled(self, key: str, value: str) -> dict[str, Observed]:
        """The cached objects whose label ``key`` is ``value`` (indexed: no scan)."""
        return self._cache.labelled(key, value)

    def subscribe(self, subscriber: Subscriber, *, route: Route | None = None) -> None:
        """Deliver every change, or with ``route`` only those of one name / label value."""
        with self._cache.lock:
            if route is None:
                self._subscribers.append(subscriber)
            else:
                self._routed.setdefault(route, []).append(subscriber)

    def unsubscribe(self, subscriber: Subscriber, *, route: Route | None = None) -> None:
        with self._cache.lock:
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
        observed = self._cache.offer(obj)
        self._drain()
        return observed

    def forget(self, name: str) -> None:
        """Drop ``name`` after this process deleted it; older watch events do not bring it back."""
        self._cache.forget(name)
        self._drain()

    def refresh(self, name: str, *, timeout: float | None = None) -> Observed | None:
        """GET ``name`` now and fold it into the cache; returns the current observation:
        the cache's when it holds that version or a newer one, else the GET's own. The
        cache leaves out an object its watch has moved past without showing it (it takes
        it for deleted since); a watch whose bookmark came before the object's event (seen
        from kube-apiserver in a whole cluster) is there until the event arrives, and the
        server's answer must not be hidden meanwhile."""
        obj = self._client.get(self._resource, name, timeout=timeout)
        if obj is not None:
            observed = self.offer(obj)
            return observed if observed is not None else self._cache.observation(obj)
        self._cache.absent(name)
        self._drain()
        return None

    # -- delivering -----------------------------------------------------------------------
    def _drain(self) -> None:
        with self._deliver_lock:
            while True:
                with self._cache.lock:
                    batch = self._cache.take_pending()
                    if not batch:
                        return
                    deliveries: list[tuple[Subscriber, list[Change]]] = [(s, batch) for s in self._subscribers]
                    if self._routed:
                        deliveries += self._route(batch)
                for subscriber, changes in deliveries:
                    try:
                        subscriber(changes)
                    except Exception:  # an internal subscriber bug must not stop the watch
                        log.exception("informer subscriber failed", extra={"informer": self.description})

    def _route(self, batch: list[Change]) -> list[tuple[Subscriber, list[Change]]]:
        """Each routed subscriber with the changes of its name or label (caller holds the cache's lock)."""
        routed: dict[int, tuple[Subscriber, list[Change]]] = {}
        for change in batch:
            name, old, new = change
            routes: set[Route] = {("name", name)}
            routes.update(("label", key, value) for key, value in labels_of(old) | labels_of(new))
            for route in routes:
                for subscriber in self._routed.get(route, ()):
                    routed.setdefault(id(subscriber), (subscriber, []))[1].append(change)
        return list(routed.values())
