"""Storage and ListenerRegistry on memory://: versioned keys in the state, listeners
notified under the state's lock so that one key's events keep their order.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from kubecoord._core.handles import RegistryHandle, StorageHandle
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.api import Fence, Versioned
from kubecoord.backends.memory.context import MemoryContext
from kubecoord.backends.memory.handle import MemoryHandle
from kubecoord.backends.memory.state import Store, Subscription, notify
from kubecoord.errors import KeyExistsError, KeyNotFoundError, VersionConflictError
from kubecoord.wire import fences
from kubecoord.wire.events import Event

T = TypeVar("T")


def _done(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


class MemoryStorage(MemoryHandle, StorageHandle):
    def __init__(self, context: MemoryContext, name: str) -> None:
        super().__init__(context, name)
        self.max_value_bytes = context.max_value_bytes

    def _fetch(self, key: str) -> Future[str | None]:
        versioned = self._read(key)
        return _done(versioned.value if versioned else None)

    def _fetch_versioned(self, key: str) -> Future[Versioned | None]:
        return _done(self._read(key))

    def _fetch_confirmed(self, key: str, max_age: float) -> tuple[Versioned | None, float]:
        # The moment on the state's clock, the one the coordinator's members judge it on.
        sent = self._state.clock.now()
        return self._read(key), sent

    def _read(self, key: str) -> Versioned | None:
        with self._state.lock:
            return self._state.store(self.name).entries.get(key)

    def _put(self, key: str, data: str, fence: Fence | None) -> int:
        return self._write(key, lambda current: self._create(key, current, data), Event.PUT, fence)

    def _update(self, key: str, data: str, expected_version: int | None, fence: Fence | None) -> int:

        def replace(current: Versioned | None) -> Versioned:
            self._expect(key, current, expected_version)
            assert current is not None
            return Versioned(data, current.version + 1)

        return self._write(key, replace, Event.UPDATED, fence)

    def _delete(self, key: str, expected_version: int | None, fence: Fence | None) -> None:

        def remove(current: Versioned | None) -> None:
            self._expect(key, current, expected_version)

        self._write(key, remove, Event.DELETED, fence)

    def _children(self, namespace: str) -> set[str]:
        with self._state.lock:
            return self._state.store(self.name).children(namespace)

    @staticmethod
    def _create(key: str, current: Versioned | None, data: str) -> Versioned:
        if current is not None:
            raise KeyExistsError(f"key {key!r} already exists (version {current.version})")
        return Versioned(data, 1)

    def _expect(self, key: str, current: Versioned | None, expected: int | None) -> None:
        if current is None:
            raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
        if expected is not None and current.version != expected:
            self._record(Event.CONFLICT, ts=self._state.wall(), key=key, version=expected)
            raise VersionConflictError(f"key {key!r} is at version {current.version}, not {expected}")

    def _write(
        self, key: str, change: Callable[[Versioned | None], Versioned | None], event: str, fence: Fence | None
    ) -> int:
        self._check_open()
        with self._state.lock:
            store = self._state.store(self.name)
            watched = list(store.key_set_subscriptions)
            before = {ns: store.children(ns) for ns in watched}
            current = store.entries.get(key)
            # The fence first: a stale holder learns nothing of the key (its version, existence).
            marks = fences.admit(store.fences, fence.name, fence.token, where=f"store {self.name!r}") if fence else None
            new = change(current)
            if marks is not None:
                store.fences = marks
            if new is None:
                del store.entries[key]
            else:
                store.entries[key] = new
            now = self._state.clock.now()
            notify(store.value_subscriptions.get(key, []), new.value if new else None, now)
            for namespace in watched:
                after = store.children(namespace)
                if after != before[namespace]:
                    notify(store.key_set_subscriptions[namespace], after, now)
            version = new.version if new else (current.version if current else 0)
            # Under the lock, so one key's events carry increasing timestamps.
            self._record(event, ts=self._state.wall(now), key=key, version=version)
        return version


class MemoryListenerRegistry(MemoryHandle, RegistryHandle):
    def __init__(self, context: MemoryContext, name: str) -> None:
        super().__init__(context, name)
        self._subscriptions: list[Subscription] = []

    def _value_listener_added(self, key: str, listeners: ListenerSet[str | None], first: bool) -> None:
        if first:
            self._subscribe(listeners, key, lambda store: store.value_subscriptions)

    def _key_set_listener_added(self, namespace: str, listeners: ListenerSet[set[str]], first: bool) -> None:
        if first:
            self._subscribe(listeners, namespace, lambda store: store.key_set_subscriptions)

    def _subscribe(
        self, listeners: ListenerSet[Any], path: str, table: Callable[[Store], dict[str, list[Subscription]]]
    ) -> None:
        subscription = self._context.subscribe(listeners)
        with self._state.lock:
            table(self._state.store(self.name)).setdefault(path, []).append(subscription)
            self._subscriptions.append(subscription)

    def _value_listeners_gone(self, key: str) -> None:
        self._unsubscribe(lambda store: store.value_subscriptions)

    def _key_set_listeners_gone(self, namespace: str) -> None:
        self._unsubscribe(lambda store: store.key_set_subscriptions)

    def _unsubscribe(self, table: Callable[[Store], dict[str, list[Subscription]]] | None = None) -> None:
        """Drop this handle's subscriptions whose listener sets are no longer in use."""
        with self._state.lock:
            live = {id(ls) for ls in [*self._values.values(), *self._key_sets.values()]}
            gone = {id(s) for s in self._subscriptions if id(s.listeners) not in live}
            self._subscriptions = [s for s in self._subscriptions if id(s) not in gone]
            store = self._state.store(self.name)
            tables = [table(store)] if table is not None else [store.value_subscriptions, store.key_set_subscriptions]
            for subscriptions_by_path in tables:
                for path, subscriptions in subscriptions_by_path.items():
                    subscriptions_by_path[path] = [s for s in subscriptions if id(s) not in gone]

    def close(self) -> None:
        if self._closed:
            return
        self._clear_listeners()
        self._unsubscribe()
        super().close()
