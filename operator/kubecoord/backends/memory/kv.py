"""Storage and ListenerRegistry on memory://: versioned keys in the state, listeners
notified under the state's lock so that one key's events keep their order.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from kubecoord import validation
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.api import KeySetListener, ListenerRegistry, Storage, ValueListener, Versioned
from kubecoord.backends.memory.handle import Handle
from kubecoord.backends.memory.state import Store, Subscription, notify
from kubecoord.errors import KeyExistsError, KeyNotFoundError, VersionConflictError

if TYPE_CHECKING:
    from kubecoord.backends.memory.coordinator import MemoryCoordinator

T = TypeVar("T")


def _done(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


class MemoryStorage(Handle, Storage):
    def __init__(self, coordinator: MemoryCoordinator, name: str) -> None:
        super().__init__(coordinator)
        self.name = name
        self.max_value_bytes = coordinator.max_value_bytes

    def fetch(self, key: str) -> Future[str | None]:
        versioned = self._read(key)
        return _done(versioned.value if versioned else None)

    def fetch_versioned(self, key: str) -> Future[Versioned | None]:
        return _done(self._read(key))

    def _read(self, key: str) -> Versioned | None:
        validation.check_key(key)
        self._check_open()
        with self._state.lock:
            return self._state.store(self.name).entries.get(key)

    def put(self, key: str, data: str) -> int:
        validation.check_key(key)
        validation.check_value(data, max_bytes=self.max_value_bytes)
        return self._write(key, lambda current: self._create(key, current, data), "put")

    def update(self, key: str, data: str, *, expected_version: int | None = None) -> int:
        validation.check_key(key)
        validation.check_value(data, max_bytes=self.max_value_bytes)
        validation.check_version(expected_version)

        def replace(current: Versioned | None) -> Versioned:
            self._expect(key, current, expected_version)
            assert current is not None
            return Versioned(data, current.version + 1)

        return self._write(key, replace, "updated")

    def delete(self, key: str, *, expected_version: int | None = None) -> None:
        validation.check_key(key)
        validation.check_version(expected_version)

        def remove(current: Versioned | None) -> None:
            self._expect(key, current, expected_version)

        self._write(key, remove, "deleted")

    def children(self, namespace: str = "") -> set[str]:
        validation.check_namespace(namespace)
        self._check_open()
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
            self._events.record(
                primitive="kv", name=self.name, event="conflict", ts=self._state.wall(), key=key, version=expected
            )
            raise VersionConflictError(f"key {key!r} is at version {current.version}, not {expected}")

    def _write(self, key: str, change: Callable[[Versioned | None], Versioned | None], event: str) -> int:
        self._check_open()
        with self._state.lock:
            store = self._state.store(self.name)
            watched = list(store.key_set_subscriptions)
            before = {ns: store.children(ns) for ns in watched}
            current = store.entries.get(key)
            new = change(current)
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
            self._events.record(
                primitive="kv", name=self.name, event=event, ts=self._state.wall(now), key=key, version=version
            )
        return version


class MemoryListenerRegistry(Handle, ListenerRegistry):
    def __init__(self, coordinator: MemoryCoordinator, name: str) -> None:
        super().__init__(coordinator)
        self.name = name
        self._value_listeners: dict[str, ListenerSet[str | None]] = {}
        self._key_set_listeners: dict[str, ListenerSet[set[str]]] = {}

    def add_value_change_listener(self, key: str, listener: ValueListener) -> None:
        validation.check_key(key)
        self._add(self._value_listeners, key, listener, lambda store: store.value_subscriptions)

    def remove_value_change_listener(self, key: str, listener: ValueListener) -> None:
        validation.check_key(key)
        if key in self._value_listeners:
            self._value_listeners[key].remove(listener)

    def add_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        validation.check_namespace(namespace)
        self._add(self._key_set_listeners, namespace, listener, lambda store: store.key_set_subscriptions)

    def remove_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        validation.check_namespace(namespace)
        if namespace in self._key_set_listeners:
            self._key_set_listeners[namespace].remove(listener)

    def _add(
        self,
        mine: dict[str, ListenerSet[Any]],
        path: str,
        listener: Callable[[Any], None],
        table: Callable[[Store], dict[str, list[Subscription]]],
    ) -> None:
        self._check_open()
        with self._state.lock:
            if path not in mine:
                mine[path] = ListenerSet()
                subscription = self._coordinator.subscribe(mine[path])
                table(self._state.store(self.name)).setdefault(path, []).append(subscription)
            mine[path].add(listener)

    def close(self) -> None:
        if self._closed:
            return
        with self._state.lock:
            store = self._state.store(self.name)
            mine = {id(ls) for ls in [*self._value_listeners.values(), *self._key_set_listeners.values()]}
            for table in (store.value_subscriptions, store.key_set_subscriptions):
                for path, subscriptions in table.items():
                    table[path] = [s for s in subscriptions if id(s.listeners) not in mine]
        super().close()
