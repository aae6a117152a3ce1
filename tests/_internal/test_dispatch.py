"""The dispatcher thread that delivers listener callbacks."""

from __future__ import annotations

import threading

from kubecoord._internal.dispatch import Dispatcher, ListenerSet


def test_delivers_in_order_on_its_own_thread_and_survives_raising_listeners() -> None:
    dispatcher = Dispatcher("test")
    listeners: ListenerSet[int] = ListenerSet()
    seen: list[tuple[int, str]] = []

    def explode(_: int) -> None:
        raise RuntimeError("bug")

    listeners.add(explode)
    listeners.add(lambda value: seen.append((value, threading.current_thread().name)))
    for value in range(100):
        dispatcher.notify(listeners, value)
    assert dispatcher.flush()
    assert [value for value, _ in seen] == list(range(100))
    assert {name for _, name in seen} == {"kubecoord-dispatch-test"}
    dispatcher.close()


def test_listener_removed_before_delivery_is_not_called() -> None:
    dispatcher = Dispatcher("test")
    gate = threading.Event()
    listeners: ListenerSet[int] = ListenerSet()
    calls: list[int] = []

    def hold() -> None:
        gate.wait(5)

    dispatcher.call(hold)  # hold the thread
    listeners.add(calls.append)
    dispatcher.notify(listeners, 1)
    listeners.remove(calls.append)
    gate.set()
    dispatcher.flush()
    assert calls == []
    dispatcher.close()


def test_close_is_idempotent_and_drops_later_notifications() -> None:
    dispatcher = Dispatcher("test")
    listeners: ListenerSet[int] = ListenerSet()
    calls: list[int] = []
    listeners.add(calls.append)
    dispatcher.notify(listeners, 1)
    dispatcher.close()
    dispatcher.close()
    dispatcher.notify(listeners, 2)
    assert calls == [1]
