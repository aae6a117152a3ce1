"""kubecoord._core.handles.ReadingRegistryHandle: what a key's and a namespace's listeners
last heard. A listener added while the previous last one is being removed keeps the
baseline it was added with: the removal does not forget it, so a later change reaches it."""

from __future__ import annotations

import threading
from typing import Any

from kubecoord._core.handles import ReadingRegistryHandle
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.history import EventLog


class _Owner:
    backend = "test"

    def check_open(self) -> None:
        pass


class _Registry(ReadingRegistryHandle):
    """A registry over a dict of key -> (token, value) and namespace -> children; the last
    listener's going waits for ``release`` once ``hold_gone`` is set (the removing thread
    between the listener set's deletion and the baseline's forgetting)."""

    def __init__(self) -> None:
        super().__init__(_Owner(), "store", EventLog())
        self.values: dict[str, tuple[object, str | None]] = {}
        self.key_sets: dict[str, set[str]] = {}
        self.hold_gone = False
        self.going = threading.Event()
        self.release = threading.Event()

    def _value_listener_added(self, key: str, listeners: ListenerSet[str | None], first: bool) -> None:
        if first:
            self._hear_value(key, self.values.get(key, (0, None))[0])

    def _key_set_listener_added(self, namespace: str, listeners: ListenerSet[set[str]], first: bool) -> None:
        if first:
            self._hear_key_set(namespace, self.key_sets.get(namespace, set()))

    def _wait_if_held(self) -> None:
        if self.hold_gone:
            self.going.set()
            assert self.release.wait(30)

    def _value_listeners_gone(self, key: str) -> None:
        self._wait_if_held()
        super()._value_listeners_gone(key)

    def _key_set_listeners_gone(self, namespace: str) -> None:
        self._wait_if_held()
        super()._key_set_listeners_gone(namespace)

    def close(self) -> None:
        self._closed = True

    def changes(self) -> list[tuple[list[Any], Any]]:
        keys, namespaces = self._heard()
        calls = self._changes({k: self.values.get(k, (0, None)) for k in keys},
                              {ns: self.key_sets.get(ns, set()) for ns in namespaces})
        return [(listeners.snapshot(), heard) for listeners, heard in calls]


def _readd_while_removing(registry: _Registry, remove: Any, add: Any) -> None:
    """``remove()`` on another thread, held between the set's deletion and the baseline's
    forgetting, while ``add()`` adds the new first listener; then the removal ends."""
    registry.hold_gone = True
    remover = threading.Thread(target=remove)
    remover.start()
    assert registry.going.wait(30)
    registry.hold_gone = False
    add()
    registry.release.set()
    remover.join(30)
    assert not remover.is_alive()


def test_a_value_listener_added_while_the_last_one_goes_hears_the_next_change() -> None:
    registry = _Registry()
    registry.values["k"] = (1, "a")

    def first(value: str | None) -> None: ...

    def second(value: str | None) -> None: ...

    registry.add_value_change_listener("k", first)
    _readd_while_removing(registry, lambda: registry.remove_value_change_listener("k", first),
                          lambda: registry.add_value_change_listener("k", second))
    registry.values["k"] = (2, "b")
    assert registry.changes() == [([second], "b")]


def test_a_key_set_listener_added_while_the_last_one_goes_hears_the_next_change() -> None:
    registry = _Registry()
    registry.key_sets["ns"] = {"a"}

    def first(names: set[str]) -> None: ...

    def second(names: set[str]) -> None: ...

    registry.add_key_set_change_listener("ns", first)
    _readd_while_removing(registry, lambda: registry.remove_key_set_change_listener("ns", first),
                          lambda: registry.add_key_set_change_listener("ns", second))
    registry.key_sets["ns"] = {"a", "b"}
    assert registry.changes() == [([second], {"a", "b"})]


def test_the_last_listener_going_forgets_the_baseline() -> None:
    registry = _Registry()
    registry.values["k"] = (1, "a")

    def listener(value: str | None) -> None: ...

    registry.add_value_change_listener("k", listener)
    registry.remove_value_change_listener("k", listener)
    assert registry._heard() == ([], [])
