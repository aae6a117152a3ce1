"""The informer's list/watch/re-list protocol against a scripted API (no server): what a
re-list after 410 delivers, and that nothing is delivered twice."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from kubecoord.backends.kubernetes.cache import Change
from kubecoord.backends.kubernetes.client import LEASES, Gone
from kubecoord.backends.kubernetes.shared_informer import Informer
from kubecoord.testing import ManualClock
from tests.helpers import eventually


def obj(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(rv)}, "spec": {"rv": rv}}


class ScriptedStream:
    """A watch stream playing ``events`` then ending (the shape of client.WatchStream)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._events = events

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        for event in self._events:
            yield event

    def close(self) -> None:
        pass


class ScriptedClient:
    """list() answers from the next of ``lists`` (else ``state``); each open_watch() plays the next script entry: a
    list of events then the end of the stream, or Gone, or (when the script is empty) waits for ``released``."""

    def __init__(self, state: dict[str, dict[str, Any]], rv: int) -> None:
        self.state, self.rv = state, rv
        self.lists: list[tuple[dict[str, dict[str, Any]], int]] = []
        self.script: list[list[dict[str, Any]] | type[Gone] | SilentStream] = []
        self.watched_from: list[str] = []
        self.released = threading.Event()

    def list(self, resource: Any, **_: Any) -> tuple[list[dict[str, Any]], str]:
        if self.lists:
            self.state, self.rv = self.lists.pop(0)
        return list(self.state.values()), str(self.rv)

    async def open_watch(self, resource: Any, *, resource_version: str, **_: Any) -> ScriptedStream | SilentStream:
        self.watched_from.append(resource_version)
        if not self.script:
            for _ in range(100):  # up to 5 s, never blocking the watch thread
                if self.released.is_set():
                    break
                await asyncio.sleep(0.05)
            return ScriptedStream([])
        entry = self.script.pop(0)
        if entry is Gone:
            raise Gone("too old")
        if isinstance(entry, SilentStream):
            return entry
        return ScriptedStream(entry)  # type: ignore[arg-type]


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
        # The re-list's changes are delivered before the watch re-opens from its version:
        # wait for both (at load 25-30 the assertion below ran in between, 2 runs of 8).
        eventually(lambda: len(delivered) == 7 and len(client.watched_from) >= 3)
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


class SilentStream:
    """Events at a steady pace, then silence until close() (a watch whose connection died
    without telling anyone)."""

    def __init__(self, events: list[dict[str, Any]], pace: float) -> None:
        self.scripted, self.pace = events, pace
        self.closed = threading.Event()

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        for event in self.scripted:
            await asyncio.sleep(self.pace)
            if self.closed.is_set():
                return
            yield event
        for _ in range(1200):  # silent for up to 60 s, until closed
            if self.closed.is_set():
                return
            await asyncio.sleep(0.05)

    def close(self) -> None:
        self.closed.set()


def test_an_offer_never_resurrects_what_the_watch_saw_deleted() -> None:
    client = ScriptedClient({"a": obj("a", 1)}, rv=1)
    client.script = [[{"type": "DELETED", "object": obj("a", 5)}]]
    informer = Informer(client, LEASES, clock=ManualClock())  # type: ignore[arg-type]
    informer.start()
    try:
        eventually(lambda: informer.get("a") is None)
        informer.offer(obj("a", 3))  # a GET answered before the deletion, arriving after it
        assert informer.get("a") is None
        informer.offer(obj("b", 4))  # never seen, older than the watch: deleted since
        assert informer.get("b") is None
        informer.offer(obj("a", 6))  # re-created after the deletion: that one counts
        assert informer.get("a") is not None
    finally:
        client.released.set()
        informer.stop()


def test_relist_keeps_objects_newer_than_the_list() -> None:
    client = ScriptedClient({"a": obj("a", 1)}, rv=1)
    informer = Informer(client, LEASES, clock=ManualClock())  # type: ignore[arg-type]
    delivered: list[tuple[str, int | None, int | None]] = []
    informer.subscribe(lambda changes: delivered.extend(names(changes)))
    client.script = [[]]
    informer.start()
    eventually(lambda: len(client.watched_from) >= 1)
    informer.offer(obj("mine", 12))  # our own create, answered at version 12
    # The re-list (after 410) was served at version 9, before that create.
    client.lists = [({"a": obj("a", 1)}, 9)]
    client.script = [Gone]
    client.released.set()
    try:
        eventually(lambda: informer.relists == 2)
    finally:
        informer.stop()
    assert informer.get("mine") is not None
    assert ("mine", 12, None) not in delivered


def test_an_unexpected_exception_does_not_end_the_watch() -> None:
    client = ScriptedClient({"a": obj("a", 1)}, rv=1)
    informer = Informer(client, LEASES, clock=ManualClock())  # type: ignore[arg-type]
    client.script = [
        [{"type": "MODIFIED", "object": ["not", "an", "object"]}],  # malformed: AttributeError inside
        [{"type": "MODIFIED", "object": obj("a", 2)}],
    ]
    informer.start()
    try:
        eventually(lambda: (informer.get("a") or obj("a", 0)).version == "2")  # type: ignore[union-attr]
    finally:
        client.released.set()
        informer.stop()


def test_a_silent_stream_is_reopened_from_the_last_version() -> None:
    client = ScriptedClient({"a": obj("a", 1)}, rv=1)
    stream = SilentStream([{"type": "MODIFIED", "object": obj("a", rv)} for rv in range(2, 12)], pace=0.05)
    client.script = [stream]
    informer = Informer(client, LEASES, clock=ManualClock())  # type: ignore[arg-type]
    informer.start()
    try:
        eventually(lambda: informer.silent_restarts == 1 and client.watched_from[-1] == "11", timeout=15)
    finally:
        client.released.set()
        informer.stop()
    assert informer.relists == 1  # resumed, not re-listed


def test_a_deletion_seen_by_a_relist_leaves_a_final_state_marked_unknown() -> None:
    """The DELETED event's object is exactly the last version; a deletion noticed by a
    re-list leaves the cached version, which newer ones may have followed (the operator
    re-creates an election Lease one epoch above it: kubecoord.operator.backing)."""
    from kubecoord.wire.object_names import FINAL_STATE_UNKNOWN_ANNOTATION

    client = ScriptedClient({"seen": obj("seen", 1), "missed": obj("missed", 2)}, rv=2)
    client.script = [[{"type": "DELETED", "object": obj("seen", 3)}], Gone]
    client.lists = [(client.state, 2), ({}, 9)]  # "missed" went at some version the watch never showed
    informer = Informer(client, LEASES, clock=ManualClock())  # type: ignore[arg-type]
    informer.start()
    try:
        eventually(lambda: informer.get("missed") is None and informer.last_state("missed") is not None)
    finally:
        client.released.set()
        informer.stop()
    exact, unknown = informer.last_state("seen"), informer.last_state("missed")
    assert exact is not None and exact["spec"]["rv"] == 3
    assert FINAL_STATE_UNKNOWN_ANNOTATION not in (exact["metadata"].get("annotations") or {})
    assert unknown is not None and unknown["spec"]["rv"] == 2
    assert unknown["metadata"]["annotations"][FINAL_STATE_UNKNOWN_ANNOTATION] == "true"
