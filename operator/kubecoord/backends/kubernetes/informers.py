"""A coordinator's informers: which list+watch serves which handle.

Two scopes (the ``watch_scope`` connect option):

``object`` (default)
    One informer per object or group a handle needs: an election's Lease and each KV
    shard by name (field selector ``metadata.name=NAME``), a group's member Leases by
    label. This is what RBAC granted by ``resourceNames`` allows (the API server
    authorizes list and watch of a named object only with that field selector), so it is
    the default; it costs one watch connection per election, store shard and group in
    use (all read on the process's one watch thread: watch_mux.py).
``namespace`` / ``managed``
    One informer per kind for the whole namespace, shared by every handle: all Leases
    (``namespace``) or only those kubecoord labels (``managed``: what the operator uses,
    so that it never streams other applications' Leases), and the ConfigMaps labelled as
    KV shards. Handles get a view narrowed to their name or label, fed through an index
    (no scan of the namespace per change). Threads and watch connections do not grow
    with the number of handles. Needs list/watch on the kind in the namespace; a
    client-go Lease that kubecoord did not create carries no kubecoord label, so
    ``managed`` does not see it until a kubecoord process has written it.

The namespace informers are shared by every coordinator of the process that has the
same server, credentials, namespace, scope and clock (so a process pays one watch per
kind and namespace however many coordinators it opens); the first coordinator's client
serves them, and they stop when the last coordinator using them closes or crashes.

Guarantees: a view answers get/items/subscribe exactly as an informer of its own
selector would (same changes, same order), and reference counts close an informer when
its last handle lets go. Object-scope informers are per coordinator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kubecoord._internal.clock import Clock, MonotonicClock
from kubecoord.backends.kubernetes.cache import Observed, Subscriber
from kubecoord.backends.kubernetes.client import KubeClient, Resource
from kubecoord.backends.kubernetes.shared_informer import Informer, Route
from kubecoord.errors import InvalidArgumentError
from kubecoord.wire import object_names

SCOPES = ("object", "namespace", "managed")
_NAMESPACE_SELECTORS = {
    "namespace": {"leases": "", "configmaps": object_names.STORE_LABEL},
    "managed": {
        "leases": f"{object_names.MANAGED_BY_LABEL}={object_names.MANAGED_BY}",
        "configmaps": object_names.STORE_LABEL,
    },
}


def check_scope(scope: object) -> str:
    if scope not in SCOPES:
        raise InvalidArgumentError(f"watch_scope must be one of {', '.join(SCOPES)}; got {scope!r}")
    return str(scope)


def _simple_label(selector: str | None) -> tuple[str, str] | None:
    """(key, value) of a one-requirement equality selector ``key=value``, else None."""
    if not selector or "," in selector or "!" in selector or "=" not in selector:
        return None
    key, _, value = selector.partition("=")
    return (key.strip(), value.strip().lstrip("="))


class InformerView(Informer):
    """A shared namespace informer narrowed to one object name or one label value."""

    def __init__(self, shared: Informer, *, name: str | None = None, label: tuple[str, str] | None = None) -> None:
        # Deliberately not Informer.__init__: a view owns no cache, thread or stream.
        self._shared = shared
        self._view_name = name
        self._view_label = label
        self._view_route: Route = ("name", name) if name is not None else ("label", *label) if label else ()

    @property
    def description(self) -> str:
        return f"{self._shared.description}/{self._view_route[1:]}"

    def _matches(self, observed: Observed | None) -> Observed | None:
        if observed is None or self._view_label is None:
            return observed
        labels = (observed.obj.get("metadata") or {}).get("labels") or {}
        key, value = self._view_label
        return observed if labels.get(key) == value else None

    def start(self) -> None:
        self._shared.start()

    def stop(self) -> None:
        """The pool stops the shared informer when its last view is released."""

    def get(self, name: str) -> Observed | None:
        if self._view_name is not None and name != self._view_name:
            return None
        return self._matches(self._shared.get(name))

    def last_state(self, name: str) -> dict[str, Any] | None:
        if self._view_name is not None and name != self._view_name:
            return None
        return self._shared.last_state(name)

    def items(self) -> dict[str, Observed]:
        if self._view_name is not None:
            observed = self._shared.get(self._view_name)
            return {self._view_name: observed} if observed is not None else {}
        if self._view_label is not None:
            return self._shared.labelled(*self._view_label)
        return self._shared.items()

    def labelled(self, key: str, value: str) -> dict[str, Observed]:
        return {name: obs for name, obs in self._shared.labelled(key, value).items() if self.get(name) is obs}

    def subscribe(self, subscriber: Subscriber, *, route: Route | None = None) -> None:
        self._shared.subscribe(subscriber, route=route or self._view_route or None)

    def unsubscribe(self, subscriber: Subscriber, *, route: Route | None = None) -> None:
        self._shared.unsubscribe(subscriber, route=route or self._view_route or None)

    def offer(self, obj: dict[str, Any]) -> Observed | None:
        return self._matches(self._shared.offer(obj))

    def forget(self, name: str) -> None:
        self._shared.forget(name)

    def refresh(self, name: str, *, timeout: float | None = None) -> Observed | None:
        return self._matches(self._shared.refresh(name, timeout=timeout))


_process_lock = threading.Lock()
_process_informers: dict[tuple[object, ...], tuple[Informer, int]] = {}
"""Namespace informers of the whole process: (identity, clock, plural, selector) -> (informer, users)."""


def _process_hold(key: tuple[object, ...], make: Callable[[], Informer]) -> Informer:
    with _process_lock:
        informer, count = _process_informers.get(key) or (make(), 0)
        _process_informers[key] = (informer, count + 1)
        return informer


def _process_release(key: tuple[object, ...]) -> None:
    with _process_lock:
        entry = _process_informers.get(key)
        if entry is None:
            return
        informer, count = entry
        if count > 1:
            _process_informers[key] = (informer, count - 1)
            return
        del _process_informers[key]
    informer.stop()


class InformerPool:
    """A coordinator's informers, one per (resource, selector), shared by reference count."""

    def __init__(self, client: KubeClient, clock: Clock, *, scope: str = "object") -> None:
        self._client = client
        self._clock = clock
        self._selectors = _NAMESPACE_SELECTORS.get(check_scope(scope), {})
        self._lock = threading.Lock()
        self._informers: dict[tuple[str, str | None, str | None], tuple[Informer, int]] = {}
        self._views: dict[int, tuple[str, str | None, str | None]] = {}
        self._process_keys: dict[tuple[str, str | None, str | None], tuple[object, ...]] = {}

    def acquire(self, resource: Resource, *, label_selector: str | None = None, name: str | None = None) -> Informer:
        shared = self._selectors.get(resource.plural)
        label = _simple_label(label_selector)
        if shared is not None and (name is not None or label is not None):
            return self._acquire_shared(resource, shared, name=name, label=label)
        return self._hold((resource.plural, label_selector, name), resource, label_selector=label_selector, name=name)

    @property
    def shares_namespace(self) -> bool:
        """Whether this pool's scope has shared namespace informers (``namespace``, ``managed``)."""
        return bool(self._selectors)

    def acquire_namespace(self, resource: Resource) -> Informer | None:
        """A view of the whole shared namespace informer of ``resource`` (every object it
        watches, every change); None in the ``object`` scope, which has none. Released
        like any other."""
        shared = self._selectors.get(resource.plural)
        return None if shared is None else self._acquire_shared(resource, shared, name=None, label=None)

    def _acquire_shared(
        self, resource: Resource, shared: str, *, name: str | None, label: tuple[str, str] | None
    ) -> Informer:
        key: tuple[str, str | None, str | None] = (resource.plural, "scope", shared)
        with self._lock:
            held = self._informers.get(key)
            if held is not None:
                self._informers[key] = (held[0], held[1] + 1)
                informer = held[0]
        if held is None:
            # Every MonotonicClock reads the same time; a test clock is shared only with itself.
            clock = "monotonic" if type(self._clock) is MonotonicClock else id(self._clock)
            process_key = (*self._client.identity, clock, resource.plural, shared)
            informer = _process_hold(process_key, lambda: Informer(
                self._client, resource, clock=self._clock, label_selector=shared or None
            ))
            with self._lock:
                held = self._informers.get(key)
                self._informers[key] = (informer, (held[1] if held else 0) + 1)
                self._process_keys[key] = process_key
            if held is not None:
                _process_release(process_key)  # another thread of this pool got there first
        view = InformerView(informer, name=name, label=None if name is not None else label)
        with self._lock:
            self._views[id(view)] = key
        return view

    def _hold(
        self, key: tuple[str, str | None, str | None], resource: Resource, *, label_selector: str | None,
        name: str | None,
    ) -> Informer:
        with self._lock:
            informer, count = self._informers.get(key) or (
                Informer(self._client, resource, clock=self._clock, label_selector=label_selector, name=name),
                0,
            )
            self._informers[key] = (informer, count + 1)
            return informer

    def release(self, informer: Informer) -> None:
        with self._lock:
            key = self._views.pop(id(informer), None)
            if key is None:
                key = next((k for k, (held, _) in self._informers.items() if held is informer), None)
            if key is None or key not in self._informers:
                return
            held, count = self._informers[key]
            if count > 1:
                self._informers[key] = (held, count - 1)
                return
            del self._informers[key]
            process_key = self._process_keys.pop(key, None)
        if process_key is not None:
            _process_release(process_key)
        else:
            held.stop()

    def stop_all(self) -> None:
        with self._lock:
            entries = list(self._informers.items())
            process_keys = dict(self._process_keys)
            self._informers.clear()
            self._views.clear()
            self._process_keys.clear()
        for key, (informer, _) in entries:
            if key in process_keys:
                _process_release(process_keys[key])
            else:
                informer.stop()

    def observed(self, plural: str, name: str) -> dict[str, Any] | None:
        """``name`` as the shared namespace informer of ``plural`` holds it; None when that
        informer does not exist (object scope, or not started) or has not seen the object."""
        informer = self._shared(plural)
        observed = informer.get(name) if informer is not None else None
        return observed.obj if observed is not None else None

    def last_state(self, plural: str, name: str) -> dict[str, Any] | None:
        """``name`` as the shared namespace informer of ``plural`` holds it, else as it was
        when that informer saw it deleted (the watch's DELETED event); None when unknown."""
        informer = self._shared(plural)
        return informer.last_state(name) if informer is not None else None

    def _shared(self, plural: str) -> Informer | None:
        """The shared namespace informer of ``plural``, if one was started."""
        shared = self._selectors.get(plural)
        if shared is None:
            return None
        with self._lock:
            entry = self._informers.get((plural, "scope", shared))
        return entry[0] if entry is not None else None

    @property
    def open_informers(self) -> int:
        """How many list+watch informers are held (each one watch connection, one thread)."""
        with self._lock:
            return len(self._informers)
