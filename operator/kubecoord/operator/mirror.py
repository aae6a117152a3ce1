"""Status mirrors: the live state of one election, group or store, as a CR status.

A mirror reads the live state of one primitive and diffs it against the previous status.
Two ways to read it: a kubecoord handle whose listeners call ``wake()`` on every change
(nothing more happens on the listener thread) — every backend has them — or the
backend's shared caches, with no handle per resource (kubecoord.operator.cached: the
kubernetes backend, kubecoord.capabilities.StateCache), woken by the controller from the
watch events of the objects the mirror names (``routes``). The owner (the status
controller) then calls ``snapshot()``, which reads the current state and returns the status
fields plus the Kubernetes Events that describe what changed since the last snapshot.

Guarantees:
- Level-triggered: many changes between two snapshots coalesce into one status; the
  status always reflects the latest state the backend reported.
- Counters survive operator restarts: each mirror starts from the resource's previous
  status (epoch, generation), so a new operator does not re-announce old changes.
- A Group's ``generation`` increases by one for every member that joined, left or
  expired since the previous snapshot; the members that went are handed to the owner,
  which tells a leave from an expiry (on Kubernetes: whether the member's Lease is left).

Not guaranteed: an Event for every intermediate state (changes that come and go between
two snapshots are folded together, as with any level-triggered controller).
"""

from __future__ import annotations

import abc
import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kubecoord.api import Coordinator, Leader
from kubecoord.operator.model import human_bytes

Route = tuple[str, str, str]
"""What wakes a cached mirror: (plural, "", object name) for one object, (plural, label
key, label value) for the objects carrying that label."""


def now_rfc3339() -> str:
    return dt.datetime.now(tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Notice:
    """A Kubernetes Event to post on the resource."""

    type: str  # "Normal" | "Warning"
    reason: str
    message: str


@dataclass(slots=True)
class Snapshot:
    status: dict[str, Any]
    notices: list[Notice] = field(default_factory=list)
    changed_at: float | None = None
    """time.monotonic() of the earliest listener call folded into this snapshot."""
    ready: tuple[bool, str, str] = (True, "Mirroring", "status mirrors the live state")
    """The Ready condition: (ok, reason, message)."""
    joined: set[str] = field(default_factory=set)
    """Group members that appeared since the previous snapshot."""
    gone: set[str] = field(default_factory=set)
    """Group members that disappeared since the previous snapshot (left or expired)."""
    recheck_in: float | None = None
    """Seconds after which the state may change with no event (a member's expiry): look again then."""


class Mirror(abc.ABC):
    """Listener subscriptions on one handle plus the diff against the previous status.

    Subclasses that read the backend's shared caches instead of a handle
    (kubecoord.operator.cached) set ``blocking`` False (a snapshot makes no request: the
    controller takes it on its loop) and name the objects whose changes concern them in
    ``routes``; the controller wakes them, so their ``wake`` is never called."""

    blocking: ClassVar[bool] = True
    """Whether snapshot() may block (requests, locks held by other threads): run it in a thread."""

    def __init__(self, wake: Callable[[], None] | None) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._changed_at: float | None = None

    def _on_change(self, *_: Any) -> None:
        with self._lock:
            if self._changed_at is None:
                self._changed_at = time.monotonic()
        if self._wake is not None:
            self._wake()

    def routes(self) -> list[Route]:
        """The objects whose changes the controller must wake this mirror for (cached
        mirrors; a handle's mirror is woken by its listeners and names none)."""
        return []

    def _take_changed_at(self) -> float | None:
        with self._lock:
            changed_at, self._changed_at = self._changed_at, None
        return changed_at

    def snapshot(self) -> Snapshot:
        changed_at = self._take_changed_at()
        result = self._snapshot()
        result.changed_at = changed_at
        return result

    @abc.abstractmethod
    def _snapshot(self) -> Snapshot: ...

    @abc.abstractmethod
    def close(self) -> None: ...


class LeaderStatus(Mirror):
    """status.leader, leaderData, epoch and leaderSince of one election, from ``_read_leader``."""

    def __init__(self, previous: dict[str, Any], wake: Callable[[], None] | None) -> None:
        super().__init__(wake)
        self._leader: str | None = previous.get("leader")
        self._epoch: int | None = previous.get("epoch")
        self._since: str | None = previous.get("leaderSince")

    @abc.abstractmethod
    def _read_leader(self) -> Leader | None: ...

    def _snapshot(self) -> Snapshot:
        leader = self._read_leader()
        notices: list[Notice] = []
        leader_id = leader.id if leader else None
        epoch = leader.epoch if leader else self._epoch
        if leader_id != self._leader or (leader is not None and leader.epoch != self._epoch):
            self._since = now_rfc3339() if leader else None
            if leader is not None:
                notices.append(Notice("Normal", "LeaderElected", f"{leader.id} leads with epoch {leader.epoch}"))
            else:
                notices.append(Notice("Normal", "LeaderLost", f"{self._leader} no longer leads; no leader"))
        self._leader, self._epoch = leader_id, epoch
        status: dict[str, Any] = {
            "leader": leader_id,
            "leaderData": leader.data if leader else None,
            "epoch": epoch,
            "leaderSince": self._since,
        }
        return Snapshot(status, notices)


class LeaderMirror(LeaderStatus):
    """The leader status through an election handle and its listener."""

    def __init__(self, coord: Coordinator, name: str, previous: dict[str, Any], wake: Callable[[], None]) -> None:
        super().__init__(previous, wake)
        self._election = coord.leader_election(name)
        self._election.add_listener(self._on_change)

    def _read_leader(self) -> Leader | None:
        return self._election.get_leader()

    def close(self) -> None:
        self._election.remove_listener(self._on_change)
        self._election.close()


STATUS_MEMBERS_BYTES = 256 * 1024
"""Budget of status.members. An object is at most ~1.5 MiB in etcd and a member's data up
to 64 KiB, so a large group listed whole would make every status write fail (413/422):
members past the budget are left out of the list (memberCount stays the full count, so
``len(members) < memberCount`` says the list is cut)."""


def status_members(membership: dict[str, str]) -> list[dict[str, str]]:
    """Members in id order, as many as fit in STATUS_MEMBERS_BYTES."""
    listed: list[dict[str, str]] = []
    used = 0
    for member in sorted(membership):
        used += len(member.encode()) + len(membership[member].encode()) + 32  # JSON punctuation
        if used > STATUS_MEMBERS_BYTES:
            break
        listed.append({"id": member, "data": membership[member]})
    return listed


class GroupStatus(Mirror):
    """status.members, memberCount and generation of one group, from ``_read_members``."""

    def __init__(self, previous: dict[str, Any], wake: Callable[[], None] | None) -> None:
        super().__init__(wake)
        self._members: set[str] = {member["id"] for member in previous.get("members") or []}
        self._generation: int = int(previous.get("generation") or 0)

    @abc.abstractmethod
    def _read_members(self) -> dict[str, str]: ...

    def _snapshot(self) -> Snapshot:
        membership = self._read_members()
        current = set(membership)
        joined, gone = current - self._members, self._members - current
        notices = [Notice("Normal", "MemberJoined", f"{member} joined") for member in sorted(joined)]
        self._generation += len(joined) + len(gone)
        self._members = current
        status = {
            "members": status_members(membership),
            "memberCount": len(membership),
            "generation": self._generation,
        }
        return Snapshot(status, notices, joined=joined, gone=gone)


class GroupMirror(GroupStatus):
    """The group status through a membership handle and its listener."""

    def __init__(self, coord: Coordinator, name: str, previous: dict[str, Any], wake: Callable[[], None]) -> None:
        super().__init__(previous, wake)
        self._group = coord.group_membership(name)
        self._group.add_listener(self._on_change)

    def _read_members(self) -> dict[str, str]:
        return self._group.membership()

    def close(self) -> None:
        self._group.remove_listener(self._on_change)
        self._group.close()


class StoreStatus(Mirror):
    """status.keys, bytes and size of one store, from ``_read_values`` (key -> value of
    every key). Size counts keys and values in UTF-8 bytes."""

    def __init__(self, limit: int, previous: dict[str, Any], wake: Callable[[], None] | None) -> None:
        super().__init__(wake)
        self._limit = limit
        self._over_limit = int(previous.get("bytes") or 0) > limit

    @abc.abstractmethod
    def _read_values(self) -> dict[str, str]: ...

    def _snapshot(self) -> Snapshot:
        values = self._read_values()
        size = sum(len(key.encode()) + len(value.encode()) for key, value in values.items())
        notices: list[Notice] = []
        over = size > self._limit
        if over and not self._over_limit:
            notices.append(
                Notice("Warning", "SizeLimitExceeded", f"{size} bytes stored, spec.sizeLimit is {self._limit}")
            )
        self._over_limit = over
        status = {"keys": len(values), "bytes": size, "size": human_bytes(size), "sizeLimitBytes": self._limit}
        if over:
            message = f"{size} bytes stored, more than spec.sizeLimit ({self._limit})"
            return Snapshot(status, notices, ready=(False, "SizeLimitExceeded", message))
        return Snapshot(status, notices)


class StoreMirror(StoreStatus):
    """The store status through a storage handle and a listener registry.

    Watches every namespace's key set and every key's value, re-subscribing as the tree
    changes, so that writes anywhere in the store wake the mirror.
    """

    def __init__(
        self, coord: Coordinator, name: str, limit: int, previous: dict[str, Any], wake: Callable[[], None]
    ) -> None:
        super().__init__(limit, previous, wake)
        self._storage = coord.storage(name)
        self._registry = coord.listener_registry(name)
        self._namespaces: set[str] = set()
        self._keys: set[str] = set()
        self._subscribe(namespaces={""}, keys=set())

    def _subscribe(self, *, namespaces: set[str], keys: set[str]) -> None:
        for namespace in namespaces - self._namespaces:
            self._registry.add_key_set_change_listener(namespace, self._on_change)
        for namespace in self._namespaces - namespaces:
            self._registry.remove_key_set_change_listener(namespace, self._on_change)
        for key in keys - self._keys:
            self._registry.add_value_change_listener(key, self._on_change)
        for key in self._keys - keys:
            self._registry.remove_value_change_listener(key, self._on_change)
        self._namespaces, self._keys = namespaces, keys

    def _walk(self) -> tuple[set[str], dict[str, str]]:
        namespaces: set[str] = set()
        values: dict[str, str] = {}
        pending = [""]
        while pending:
            namespace = pending.pop()
            namespaces.add(namespace)
            for child in self._storage.children(namespace):
                path = f"{namespace}/{child}" if namespace else child
                pending.append(path)
                value = self._storage.fetch(path).result()
                if value is not None:
                    values[path] = value
        return namespaces, values

    def _read_values(self) -> dict[str, str]:
        namespaces, values = self._walk()
        self._subscribe(namespaces=namespaces, keys=set(values))
        return values

    def close(self) -> None:
        self._subscribe(namespaces=set(), keys=set())
        self._registry.close()
        self._storage.close()
