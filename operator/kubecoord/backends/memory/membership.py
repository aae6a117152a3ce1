"""GroupMembership on memory://: members belong to their coordinator's session.

A member stays until it leaves, its coordinator closes, or session_timeout after its
coordinator crashed (simulate_crash); every live coordinator watching the group logs the
expiry it observed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubecoord import validation
from kubecoord._internal.dispatch import ListenerSet
from kubecoord.api import GroupMembership, MembershipListener
from kubecoord.backends.memory.handle import Handle
from kubecoord.backends.memory.state import Member, notify
from kubecoord.errors import MemberExistsError, MemberNotFoundError

if TYPE_CHECKING:
    from kubecoord.backends.memory.coordinator import MemoryCoordinator


class MemoryGroupMembership(Handle, GroupMembership):
    def __init__(self, coordinator: MemoryCoordinator, group: str) -> None:
        super().__init__(coordinator)
        self.group = group
        self._listeners: ListenerSet[set[str]] = ListenerSet()
        self._mine: set[str] = set()
        with self._state.lock:
            self._state.group(group).subscriptions.append(coordinator.subscribe(self._listeners))

    def join(self, member_id: str, data: str = "") -> None:
        validation.check_id(member_id, "member_id")
        validation.check_data(data)
        self._check_open()
        with self._state.lock:
            self._state.expire_sessions()
            group = self._state.group(self.group)
            if member_id in group.members:
                raise MemberExistsError(f"member {member_id!r} is already in group {self.group!r}")
            group.members[member_id] = Member(self._coordinator.session, data, self._events)
            self._mine.add(member_id)
            notify(group.subscriptions, set(group.members), self._state.clock.now())
            self._events.record(
                primitive="group", name=self.group, event="joined", ts=self._state.wall(), member=member_id
            )

    def leave(self, member_id: str) -> None:
        validation.check_id(member_id, "member_id")
        self._check_open()
        with self._state.lock:
            if member_id not in self._mine:
                raise MemberNotFoundError(f"member {member_id!r} was not joined through this handle")
            self._remove(member_id)

    def _remove(self, member_id: str) -> None:
        group = self._state.group(self.group)
        self._mine.discard(member_id)
        member = group.members.get(member_id)
        if member is not None and member.session is self._coordinator.session:
            del group.members[member_id]
            notify(group.subscriptions, set(group.members), self._state.clock.now())
            self._events.record(
                primitive="group", name=self.group, event="left", ts=self._state.wall(), member=member_id
            )

    def membership(self) -> dict[str, str]:
        self._check_open()
        with self._state.lock:
            self._state.expire_sessions()
            return {mid: m.data for mid, m in self._state.group(self.group).members.items()}

    def membership_list(self) -> set[str]:
        return set(self.membership())

    def add_listener(self, listener: MembershipListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: MembershipListener) -> None:
        self._listeners.remove(listener)

    def close(self) -> None:
        if self._closed:
            return
        with self._state.lock:
            for member_id in list(self._mine):
                self._remove(member_id)
            group = self._state.group(self.group)
            group.subscriptions = [s for s in group.subscriptions if s.listeners is not self._listeners]
        super().close()
