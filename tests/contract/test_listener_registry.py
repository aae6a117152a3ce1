"""Contract: value and key-set change listeners (KIP-30 ListenerRegistry) on every backend."""

from __future__ import annotations

from kubecoord import InvalidArgumentError

from ..helpers import Recorder
from .harness import Harness


def test_value_listener_sees_writes_and_delete(harness: Harness, name: str) -> None:
    registry = harness.connect().listener_registry(name)
    writer = harness.connect().storage(name)
    seen: Recorder[str | None] = Recorder()
    registry.add_value_change_listener("topics/orders", seen)
    writer.put("topics/orders", "v1")
    seen.wait_last("v1", harness.settle)
    writer.update("topics/orders", "v2")
    seen.wait_last("v2", harness.settle)
    writer.delete("topics/orders")
    seen.wait_last(None, harness.settle)
    writer.put("topics/other", "unrelated")
    writer.put("topics/orders", "v3")
    calls = seen.wait_last("v3", harness.settle)
    assert "unrelated" not in calls


def test_key_set_listener_sees_children_come_and_go(harness: Harness, name: str) -> None:
    registry = harness.connect().listener_registry(name)
    writer = harness.connect().storage(name)
    seen: Recorder[set[str]] = Recorder()
    registry.add_key_set_change_listener("topics", seen)
    writer.put("topics/orders", "1")
    seen.wait_last({"orders"}, harness.settle)
    writer.put("topics/payments/config", "2")
    seen.wait_last({"orders", "payments"}, harness.settle)
    writer.delete("topics/orders")
    seen.wait_last({"payments"}, harness.settle)
    writer.delete("topics/payments/config")
    seen.wait_last(set(), harness.settle)


def test_root_key_set_listener(harness: Harness, name: str) -> None:
    registry = harness.connect().listener_registry(name)
    writer = harness.connect().storage(name)
    seen: Recorder[set[str]] = Recorder()
    registry.add_key_set_change_listener("", seen)
    writer.put("a/b", "1")
    writer.put("c", "2")
    seen.wait_last({"a", "c"}, harness.settle)


def test_removed_listener_is_not_called_and_raising_listener_is_survived(harness: Harness, name: str) -> None:
    registry = harness.connect().listener_registry(name)
    writer = harness.connect().storage(name)
    removed: Recorder[str | None] = Recorder()
    kept: Recorder[str | None] = Recorder()

    def explode(_: str | None) -> None:
        raise RuntimeError("listener bug")

    registry.add_value_change_listener("k", explode)
    registry.add_value_change_listener("k", removed)
    registry.add_value_change_listener("k", kept)
    registry.remove_value_change_listener("k", removed)
    writer.put("k", "1")
    kept.wait_last("1", harness.settle)
    writer.update("k", "2")
    kept.wait_last("2", harness.settle)
    assert removed.calls == []


def test_invalid_listener_paths_are_rejected(harness: Harness, name: str) -> None:
    registry = harness.connect().listener_registry(name)
    for bad in ["/a", "a//b", ".."]:
        try:
            registry.add_value_change_listener(bad, lambda _: None)
        except InvalidArgumentError:
            pass
        else:
            raise AssertionError(f"{bad!r} was accepted as a key")
