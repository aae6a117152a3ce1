"""The shared interface: KIP-30's four clients rendered in Python.

Every backend implements these abstract classes; application code is written against
them only. Blocking methods plus listener callbacks, as KIP-30 defines them; every
object is a context manager whose exit is KIP-30's close().

Guarantees every backend keeps:

- Listener callbacks run on the coordinator's dispatcher thread, one at a time, in the
  order the backend observed the changes, never while a backend lock is held. A callback
  that raises is logged and does not stop later callbacks.
- Listeners are level-triggered: rapid changes may be coalesced, but the last call a
  listener receives always reflects the latest state the backend observed.
- A leader's epoch increases on every change of leadership (fencing token); a key's
  version increases by exactly 1 on every successful write of that key.
- Invalid input raises InvalidArgumentError before any request (kubecoord.validation).

Not guaranteed: that a leader still leads by the time it acts on is_leader() — use the
epoch as a fencing token where the work itself can check it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType
from typing import Self

LeaderListener = Callable[[str | None], None]
"""Called with the new leader's id, or None while there is no (known) leader."""

MembershipListener = Callable[[set[str]], None]
"""Called with the set of live member ids after every change."""

ValueListener = Callable[[str | None], None]
"""Called with a key's new value, or None after it was deleted."""

KeySetListener = Callable[[set[str]], None]
"""Called with the names of a namespace's direct children after every change."""


@dataclass(frozen=True, slots=True)
class Leader:
    """The current leader of an election as the backend records it."""

    id: str
    data: str
    epoch: int


@dataclass(frozen=True, slots=True)
class Versioned:
    """A value with its per-key version (1 after put, +1 on every update)."""

    value: str
    version: int


class _Closeable(abc.ABC):
    """close() plus the context-manager protocol (KIP-30's close())."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything this object holds. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class LeaderElection(_Closeable):
    """KIP-30's LeaderElectionClient for one service.

    close() resigns every candidate nominated through this handle, so that another
    candidate takes over at once rather than after the lease/session expires.
    """

    service: str

    @abc.abstractmethod
    def nominate(self, candidate_id: str, data: str = "") -> bool:
        """Enter ``candidate_id`` into the election with ``data`` (visible in get_leader()).

        Returns True if the candidate leads when the call returns. Either way the
        candidate keeps running in the background until resign() or close(), and
        listeners report when it wins or loses. Raises MemberExistsError if this
        handle already nominated that id.
        """

    @abc.abstractmethod
    def get_leader(self) -> Leader | None:
        """The current leader as recorded by the backend, or None. Works without nominating."""

    @abc.abstractmethod
    def resign(self, candidate_id: str) -> None:
        """Give up leadership and withdraw the candidacy of ``candidate_id``.

        Another candidate takes over at once (driven by a watch, not a poll). Ignored if
        ``candidate_id`` does not lead; a non-leading candidate stays in the running.
        """

    @abc.abstractmethod
    def is_leader(self, candidate_id: str | None = None) -> bool:
        """Whether ``candidate_id`` (or any candidate of this handle) leads, in its own view.

        Answered locally from the holder's renew deadline: it turns False when the
        holder has not confirmed its leadership in time, before any other candidate can
        take over.
        """

    @abc.abstractmethod
    def add_listener(self, listener: LeaderListener) -> None:
        """Call ``listener(leader_id_or_None)`` on every change of leader."""

    @abc.abstractmethod
    def remove_listener(self, listener: LeaderListener) -> None:
        """Stop calling ``listener``. Unknown listeners are ignored."""


class GroupMembership(_Closeable):
    """KIP-30's GroupMembershipClient for one group. close() leaves every joined member."""

    group: str

    @abc.abstractmethod
    def join(self, member_id: str, data: str = "") -> None:
        """Join as ``member_id``; kept alive until leave(), close() or session loss.

        Raises MemberExistsError if a live member already has that id.
        """

    @abc.abstractmethod
    def leave(self, member_id: str) -> None:
        """Leave the group. Raises MemberNotFoundError if this handle did not join it."""

    @abc.abstractmethod
    def membership_list(self) -> set[str]:
        """The ids of the live members."""

    @abc.abstractmethod
    def membership(self) -> dict[str, str]:
        """The live members' ids mapped to their data."""

    @abc.abstractmethod
    def add_listener(self, listener: MembershipListener) -> None:
        """Call ``listener(member_ids)`` after every join, leave and expiry."""

    @abc.abstractmethod
    def remove_listener(self, listener: MembershipListener) -> None:
        """Stop calling ``listener``. Unknown listeners are ignored."""


class Storage(_Closeable):
    """KIP-30's Storage: a key-value store with per-key versions.

    Keys are '/'-separated paths (see kubecoord.validation). Versions: put() creates a
    key at version 1, every update() adds 1, delete() removes the key; a later put()
    starts again at 1.
    """

    name: str
    max_value_bytes: int
    """The largest value (UTF-8 bytes) this backend stores; larger raise ValueTooLargeError."""

    @abc.abstractmethod
    def fetch(self, key: str) -> Future[str | None]:
        """The key's value, or None if absent."""

    @abc.abstractmethod
    def fetch_versioned(self, key: str) -> Future[Versioned | None]:
        """The key's value and version, or None if absent."""

    @abc.abstractmethod
    def put(self, key: str, data: str) -> int:
        """Create ``key``; returns its version (1). Raises KeyExistsError if present."""

    @abc.abstractmethod
    def update(self, key: str, data: str, *, expected_version: int | None = None) -> int:
        """Replace the value of an existing key; returns the new version.

        Raises KeyNotFoundError if absent, VersionConflictError if ``expected_version``
        is given and is not the current version.
        """

    @abc.abstractmethod
    def delete(self, key: str, *, expected_version: int | None = None) -> None:
        """Remove ``key``. Raises KeyNotFoundError if absent, VersionConflictError if stale."""

    @abc.abstractmethod
    def children(self, namespace: str = "") -> set[str]:
        """Names of the direct children of ``namespace`` ('' is the root).

        A name is a child while it is a key itself or has keys below it.
        """


class ListenerRegistry(_Closeable):
    """KIP-30's ListenerRegistry over one store's keys."""

    name: str

    @abc.abstractmethod
    def add_value_change_listener(self, key: str, listener: ValueListener) -> None:
        """Call ``listener(value_or_None)`` whenever ``key`` is written or deleted."""

    @abc.abstractmethod
    def remove_value_change_listener(self, key: str, listener: ValueListener) -> None:
        """Stop calling ``listener`` for ``key``."""

    @abc.abstractmethod
    def add_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        """Call ``listener(child_names)`` whenever the direct children of ``namespace`` change."""

    @abc.abstractmethod
    def remove_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        """Stop calling ``listener`` for ``namespace``."""


class Coordinator(_Closeable):
    """A connection to one backend (KIP-30's init(context)); hands out the four clients.

    close() closes every handle it handed out: candidates resign, members leave.
    """

    backend: str
    """The backend's URL scheme: "memory", "kubernetes", "zookeeper", ..."""

    @abc.abstractmethod
    def leader_election(self, service: str) -> LeaderElection:
        """A LeaderElection client for ``service`` (a DNS-1123 label)."""

    @abc.abstractmethod
    def group_membership(self, group: str) -> GroupMembership:
        """A GroupMembership client for ``group`` (a DNS-1123 label)."""

    @abc.abstractmethod
    def storage(self, name: str) -> Storage:
        """A Storage client for the store ``name`` (a DNS-1123 label)."""

    @abc.abstractmethod
    def listener_registry(self, name: str) -> ListenerRegistry:
        """A ListenerRegistry over the store ``name``."""
