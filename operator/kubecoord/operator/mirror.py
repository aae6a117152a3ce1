"""Status mirrors: the live state of one election, group or store, as a CR status — what
every mirror is; each kind's mirrors live with the rest of its code (kubecoord.operator.kinds).

A mirror reads the live state of one primitive and diffs it against the previous status.
Two ways to read it: a kubecoord handle whose listeners call ``wake()`` on every change
(nothing more happens on the listener thread) — every backend has them — or the
backend's shared caches, with no handle per resource (``caches``: the kubernetes backend,
kubecoord.capabilities.StateCache), woken by the controller from the watch events of the
objects the mirror names (``routes``). The owner (the status
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

from kubecoord.api import Coordinator
from kubecoord.capabilities import StateCache

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
    (``caches``) set ``blocking`` False (a snapshot makes no request: the
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


def caches(coordinator: Coordinator) -> StateCache | None:
    """``coordinator`` as a StateCache whose reads work in its watch scope, else None."""
    if isinstance(coordinator, StateCache) and coordinator.caches_namespace():
        return coordinator
    return None
