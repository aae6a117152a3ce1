"""A Group's membership status: members (as many as fit), memberCount and generation,
read through a membership handle (every backend); the cached read is group/cached.py."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.operator.mirror import Mirror, Notice, Snapshot

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
