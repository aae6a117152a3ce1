"""GroupMembership on memory://: members belong to their coordinator's session.

A member stays until it leaves, its coordinator closes, or lease_duration after its
coordinator crashed (simulate_crash); every live coordinator watching the group logs the
expiry it observed.
"""

from __future__ import annotations

from kubecoord._core.handles import GroupHandle
from kubecoord.backends.memory.context import MemoryContext
from kubecoord.backends.memory.handle import MemoryHandle
from kubecoord.backends.memory.state import Member, notify
from kubecoord.errors import MemberExistsError, MemberNotFoundError
from kubecoord.wire.events import Event


class MemoryGroupMembership(MemoryHandle, GroupHandle):
    def __init__(self, context: MemoryContext, group: str) -> None:
        super().__init__(context, group)
        self._mine: set[str] = set()
        with self._state.lock:
            self._state.group(group).subscriptions.append(context.subscribe(self._listeners))

    def _join(self, member_id: str, data: str) -> None:
        with self._state.lock:
            self._state.expire_sessions()
            group = self._state.group(self.group)
            if member_id in group.members:
                raise MemberExistsError(f"member {member_id!r} is already in group {self.group!r}")
            group.members[member_id] = Member(self._context.session, data, self._events)
            self._mine.add(member_id)
            notify(group.subscriptions, set(group.members), self._state.clock.now())
            self._record(Event.JOINED, ts=self._state.wall(), member=member_id)

    def _leave(self, member_id: str) -> None:
        with self._state.lock:
            if member_id not in self._mine:
                raise MemberNotFoundError(f"member {member_id!r} was not joined through this handle")
            self._remove(member_id)

    def _remove(self, member_id: str) -> None:
        group = self._state.group(self.group)
        self._mine.discard(member_id)
        member = group.members.get(member_id)
        if member is not None and member.session is self._context.session:
            del group.members[member_id]
            notify(group.subscriptions, set(group.members), self._state.clock.now())
            self._record(Event.LEFT, ts=self._state.wall(), member=member_id)

    def _membership(self) -> dict[str, str]:
        with self._state.lock:
            self._state.expire_sessions()
            return {mid: m.data for mid, m in self._state.group(self.group).members.items()}

    def close(self) -> None:
        if self._closed:
            return
        with self._state.lock:
            for member_id in list(self._mine):
                self._remove(member_id)
            group = self._state.group(self.group)
            group.subscriptions = [s for s in group.subscriptions if s.listeners is not self._listeners]
        super().close()
