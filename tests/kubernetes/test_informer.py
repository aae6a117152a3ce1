"""The informer's list/watch/re-list protocol against a scripted API (no server): what a
re-list after 410 delivers, and that nothing is delivered twice."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from kubecoord.backends.kubernetes.client import LEASES, Gone
from kubecoord.backends.kubernetes.watch import Change, Informer
from kubecoord.testing import ManualClock

from ..helpers import eventually


def obj(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(rv)}, "spec": {"rv": rv}}


class ScriptedClient:
    """list() answers from the next of ``lists`` (else ``state``); each watch() plays the next script entry: a list of
    events then the end of the stream, or Gone, or (when the script is empty) blocks."""

    def __init__(self, state: dict[str, dict[str, Any]], rv: int) -> None:
        self.state, self.rv = state, rv
        self.lists: list[tuple[dict[str, dict[str, Any]], int]] = []
        self.script: list[list[dict[str, Any]] | type[Gone]] = []
        self.watched_from: list[str] = []
        self.released = threading.Event()

    def list(self, resource: Any, **_: Any) -> tuple[list[dict[str, Any]], str]:
        if self.lists:
            self.state, self.rv = self.lists.pop(0)
        return list(self.state.values()), str(self.rv)

    def watch(self, resource: Any, *, resource_version: str, **_: Any) -> Iterator[dict[str, Any]]:
        self.watched_from.append(resource_version)
        if not self.script:
            self.released.wait(5)
            return iter([])
        entry = self.script.pop(0)
        if entry is Gone:
            raise Gone("too old")
        return iter(entry)  # type: ignore[arg-type]


def names(changes: list[Change]) -> list[tuple[str, int | None, int | None]]:
    return [
        (name, old.obj["spec"]["rv"] if old else None, new.obj["spec"]["rv"] if new else None)
        for name, old, new in changes
    ]


def test_relist_after_gone_delivers_exactly_the_difference() -> None:
    client = ScriptedClient({"a": obj("a", 1), "b": obj("b", 2), "d": obj("d", 3)}, rv=3)
    client.script = [[{"type": "MODIFIED", "object": obj("a", 4)}, {"type": "BOOKMARK", "object": obj("", 5)}], Gone]
    informer = Informer(client, LEASES, clock=ManualClock())  # type: ignore[arg-type]
    delivered: list[tuple[str, int | None, int | None]] = []
    informer.subscribe(lambda changes: delivered.extend(names(changes)))
    # By the re-list: a changed again, b deleted, c created, d untouched.
    client.lists = [(client.state, 3), ({"a": obj("a", 7), "c": obj("c", 8), "d": obj("d", 3)}, 9)]
    informer.start()
    try:
        eventually(lambda: len(delivered) == 7)
    finally:
        client.released.set()
        informer.stop()
    assert delivered[:4] == [("a", None, 1), ("b", None, 2), ("d", None, 3), ("a", 1, 4)]
    assert sorted(delivered[4:]) == [("a", 4, 7), ("b", 2, None), ("c", None, 8)]
    assert client.watched_from[:3] == ["3", "5", "9"]  # from the list, the bookmark, the re-list
    assert informer.get("d") is not None and informer.get("b") is None


def test_own_writes_and_the_watch_event_for_them_are_delivered_once() -> None:
    client = ScriptedClient({"a": obj("a", 1)}, rv=1)
    informer = Informer(client, LEASES, clock=ManualClock())  # type: ignore[arg-type]
    delivered: list[tuple[str, int | None, int | None]] = []
    informer.subscribe(lambda changes: delivered.extend(names(changes)))
    client.script = [[]]  # an empty stream first, so the offer below races no event
    informer.start()
    informer.offer(obj("a", 2))  # our write's response
    informer.offer(obj("a", 2))  # the same again (e.g. a GET after a conflict)
    client.script = [[{"type": "MODIFIED", "object": obj("a", 2)}, {"type": "MODIFIED", "object": obj("a", 3)}]]
    try:
        eventually(lambda: len(delivered) == 3)
    finally:
        client.released.set()
        informer.stop()
    assert delivered == [("a", None, 1), ("a", 1, 2), ("a", 2, 3)]
