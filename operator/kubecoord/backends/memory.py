"""The in-process backend: memory:// (private) and memory://NAME (shared in the process).

Usage::

    with kubecoord.connect("memory://demo") as coord:
        le = coord.leader_election("billing")
        le.nominate("pod-a")

Every coordinator connected to the same NAME in one process shares one state, so tests
and demos can run many candidates side by side; ``memory://`` alone is a private store.

Options:

=================  ===========  ======================================================
option             default      meaning
=================  ===========  ======================================================
session_timeout    10.0         seconds after a crash until the session's leadership
                                and memberships expire
clock              monotonic    a kubecoord.testing.ManualClock makes expiry
                                deterministic; shared states keep the first clock
max_value_bytes    1 MiB        largest value a store accepts
=================  ===========  ======================================================

Semantics match the other backends: candidates queue in nomination order and the first
live one leads; the epoch increases on every change of leader; a session that stops
without closing (simulate_crash(), the in-process analogue of kill -9) keeps its
leadership and memberships until ``session_timeout`` has passed on the clock, exactly
as a Lease or a ZooKeeper session would.

Event log (``history=``): events are stamped on the state's clock mapped to wall time,
so a ManualClock gives a consistent history. ``acquired`` carries valid_until = now +
session_timeout (the holder's view: it leads until it resigns, or that long after it
dies); simulate_crash() logs the session's last heartbeat (``renewed`` for leaderships
and memberships it holds) as a process whose renewal loop logged just before kill -9
would; an expired membership is logged as ``expired`` by every live coordinator
watching that group. A live memory leader never loses leadership, so no ``lost``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubecoord import validation
from kubecoord._internal.clock import Clock, MonotonicClock
from kubecoord._internal.dispatch import Dispatcher, ListenerSet
from kubecoord.api import (
    Coordinator,
    GroupMembership,
    KeySetListener,
    Leader,
    LeaderElection,
    LeaderListener,
    ListenerRegistry,
    MembershipListener,
    Storage,
    ValueListener,
    Versioned,
)
from kubecoord.connect import BackendURL
from kubecoord.errors import (
    ClosedError,
    InvalidArgumentError,
    KeyExistsError,
    KeyNotFoundError,
    MemberExistsError,
    MemberNotFoundError,
    VersionConflictError,
)
from kubecoord.history import EventLog, HistoryTarget, open_event_log

T = TypeVar("T")

DEFAULT_SESSION_TIMEOUT = 10.0
DEFAULT_MAX_VALUE_BYTES = 1024 * 1024

_session_ids = itertools.count(1)


@dataclass(eq=False)
class _Session:
    """One coordinator's liveness: alive until closed, or until timeout after a crash."""

    timeout: float
    id: int = field(default_factory=lambda: next(_session_ids))
    crashed_at: float | None = None
    closed: bool = False

    def live(self, now: float) -> bool:
        if self.closed:
            return False
        return self.crashed_at is None or now < self.crashed_at + self.timeout


@dataclass(eq=False)
class _Subscription:
    """A handle's listener set, delivered through that handle's coordinator."""

    session: _Session
    dispatcher: Dispatcher
    listeners: ListenerSet[Any]
    events: EventLog


@dataclass(eq=False)
class _Candidate:
    session: _Session
    id: str
    data: str
    events: EventLog


@dataclass(eq=False)
class _Election:
    candidates: list[_Candidate] = field(default_factory=list)
    leader: _Candidate | None = None
    epoch: int = 0
    subscriptions: list[_Subscription] = field(default_factory=list)


@dataclass(eq=False)
class _Member:
    session: _Session
    data: str
    events: EventLog


@dataclass(eq=False)
class _Group:
    members: dict[str, _Member] = field(default_factory=dict)
    subscriptions: list[_Subscription] = field(default_factory=list)


@dataclass(eq=False)
class _Store:
    entries: dict[str, Versioned] = field(default_factory=dict)
    value_subscriptions: dict[str, list[_Subscription]] = field(default_factory=dict)
    key_set_subscriptions: dict[str, list[_Subscription]] = field(default_factory=dict)

    def children(self, namespace: str) -> set[str]:
        names = (validation.child_name(namespace, key) for key in self.entries)
        return {name for name in names if name is not None}


class _State:
    """Everything one memory://NAME holds; all mutation happens under ``lock``."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.elections: dict[str, _Election] = {}
        self.groups: dict[str, _Group] = {}
        self.stores: dict[str, _Store] = {}
        self.crashed: list[_Session] = []
        # Events are stamped on this state's clock, mapped to wall time once, so a
        # ManualClock yields a consistent history (expiry happens when it advances).
        self.wall_offset = time.time() - clock.now()
        clock.on_advance(self.expire_sessions)

    def wall(self, now: float | None = None) -> float:
        """The wall-clock time of ``now`` on this state's clock (default: now)."""
        return (self.clock.now() if now is None else now) + self.wall_offset

    def election(self, service: str) -> _Election:
        return self.elections.setdefault(service, _Election())

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group())

    def store(self, name: str) -> _Store:
        return self.stores.setdefault(name, _Store())

    # -- leadership ---------------------------------------------------------------
    def elect(self, service: str) -> None:
        """Make the first live candidate lead; bump the epoch and notify on change."""
        election = self.election(service)
        now = self.clock.now()
        if election.leader is not None and election.leader.session.live(now):
            return
        election.candidates = [c for c in election.candidates if c.session.live(now)]
        previous = election.leader
        election.leader = election.candidates[0] if election.candidates else None
        if election.leader is not None:
            election.epoch += 1
        if previous is not election.leader:
            leader = election.leader
            if leader is not None:
                # The holder's own view: it leads until it resigns, or until
                # session_timeout after it dies.
                leader.events.record(
                    primitive="leader_election", name=service, event="acquired", ts=self.wall(now),
                    member=leader.id, epoch=election.epoch, valid_until=self.wall(now + leader.session.timeout),
                )
            _notify(election.subscriptions, leader.id if leader else None, now)

    def withdraw(self, service: str, candidate: _Candidate) -> None:
        election = self.election(service)
        if candidate in election.candidates:
            election.candidates.remove(candidate)
        if election.leader is candidate:
            election.leader = None
            self.elect(service)

    # -- expiry -------------------------------------------------------------------
    def crash(self, session: _Session) -> None:
        with self.lock:
            session.crashed_at = self.clock.now()
            self.crashed.append(session)
        if isinstance(self.clock, MonotonicClock):
            timer = threading.Timer(session.timeout + 0.01, self.expire_sessions)
            timer.daemon = True
            timer.start()

    def expire_sessions(self) -> None:
        """Drop the leadership and memberships of crashed sessions whose timeout passed."""
        with self.lock:
            now = self.clock.now()
            expired = [s for s in self.crashed if not s.live(now)]
            if not expired:
                return
            self.crashed = [s for s in self.crashed if s not in expired]
            for service, election in self.elections.items():
                if election.leader is not None and election.leader.session in expired:
                    election.leader = None
                election.candidates = [c for c in election.candidates if c.session not in expired]
                self.elect(service)
            for name, group in self.groups.items():
                gone = [mid for mid, m in group.members.items() if m.session in expired]
                for member_id in gone:
                    del group.members[member_id]
                    self._record_expiry(group, name, member_id, now)
                if gone:
                    _notify(group.subscriptions, set(group.members), now)

    def _record_expiry(self, group: _Group, name: str, member_id: str, now: float) -> None:
        """Every live coordinator watching the group logs the expiry it observed (once each)."""
        observers = {id(s.events): s.events for s in group.subscriptions if s.session.live(now)}
        for events in observers.values():
            events.record(primitive="group", name=name, event="expired", ts=self.wall(now), member=member_id)

    def record_heartbeats(self, session: _Session) -> None:
        """Log a session's last heartbeat: what a process whose renewal loop logged just
        before kill -9 leaves behind (valid_until = now + session_timeout)."""
        now = self.clock.now()
        until = self.wall(now + session.timeout)
        for service, election in self.elections.items():
            leader = election.leader
            if leader is not None and leader.session is session:
                leader.events.record(
                    primitive="leader_election", name=service, event="renewed", ts=self.wall(now),
                    member=leader.id, epoch=election.epoch, valid_until=until,
                )
        for name, group in self.groups.items():
            for member_id, member in group.members.items():
                if member.session is session:
                    member.events.record(
                        primitive="group", name=name, event="renewed", ts=self.wall(now),
                        member=member_id, valid_until=until,
                    )


def _notify(subscriptions: list[_Subscription], value: object, now: float) -> None:
    for subscription in subscriptions:
        if subscription.session.live(now) and subscription.session.crashed_at is None:
            subscription.dispatcher.notify(subscription.listeners, value)


_shared_states: dict[str, _State] = {}
_shared_lock = threading.Lock()


def _state_for(url: BackendURL, clock: Clock | None) -> _State:
    if not url.location:
        return _State(clock or MonotonicClock())
    with _shared_lock:
        if url.location not in _shared_states:
            _shared_states[url.location] = _State(clock or MonotonicClock())
        return _shared_states[url.location]


class MemoryCoordinator(Coordinator):
    """A coordinator on an in-process state. See the module docstring for options."""

    backend = "memory"

    def __init__(self, state: _State, *, session_timeout: float, max_value_bytes: int, events: EventLog) -> None:
        self._state = state
        self._session = _Session(timeout=session_timeout)
        self._dispatcher = Dispatcher(f"memory-{self._session.id}")
        self._events = events
        self._max_value_bytes = max_value_bytes
        self._handles: list[_Handle] = []

    # -- handles ------------------------------------------------------------------
    def leader_election(self, service: str) -> LeaderElection:
        return self._track(_MemoryElection(self, validation.check_name(service, "service")))

    def group_membership(self, group: str) -> GroupMembership:
        return self._track(_MemoryGroup(self, validation.check_name(group, "group")))

    def storage(self, name: str) -> Storage:
        return self._track(_MemoryStorage(self, validation.check_name(name, "store name")))

    def listener_registry(self, name: str) -> ListenerRegistry:
        return self._track(_MemoryListenerRegistry(self, validation.check_name(name, "store name")))

    def _track(self, handle: _H) -> _H:
        self._check_open()
        self._handles.append(handle)
        return handle

    # -- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        if self._session.closed or self._session.crashed_at is not None:
            return
        for handle in reversed(self._handles):
            handle.close()
        with self._state.lock:
            self._session.closed = True
        self._dispatcher.close()
        self._events.close()

    def simulate_crash(self) -> None:
        """Stop as a killed process would: no resign, no leave, no more callbacks.

        Leadership and memberships of this session expire ``session_timeout`` later on
        the state's clock. A test hook, the in-process analogue of kill -9.
        """
        self._check_open()
        with self._state.lock:
            self._state.record_heartbeats(self._session)
        self._state.crash(self._session)
        self._dispatcher.close(timeout=0)
        self._events.close()

    def _check_open(self) -> None:
        if self._session.closed or self._session.crashed_at is not None:
            raise ClosedError("this memory coordinator was closed")

    def _subscribe(self, listeners: ListenerSet[Any]) -> _Subscription:
        return _Subscription(self._session, self._dispatcher, listeners, self._events)


class _Handle:
    def __init__(self, coordinator: MemoryCoordinator) -> None:
        self._coordinator = coordinator
        self._state = coordinator._state
        self._events = coordinator._events
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"this {type(self).__name__.removeprefix('_Memory')} handle was closed")
        self._coordinator._check_open()

    def close(self) -> None:
        self._closed = True


_H = TypeVar("_H", bound=_Handle)


class _MemoryElection(_Handle, LeaderElection):
    def __init__(self, coordinator: MemoryCoordinator, service: str) -> None:
        super().__init__(coordinator)
        self.service = service
        self._listeners: ListenerSet[str | None] = ListenerSet()
        self._mine: dict[str, _Candidate] = {}
        with self._state.lock:
            self._state.election(service).subscriptions.append(coordinator._subscribe(self._listeners))

    def nominate(self, candidate_id: str, data: str = "") -> bool:
        validation.check_id(candidate_id, "candidate_id")
        validation.check_data(data)
        self._check_open()
        with self._state.lock:
            if candidate_id in self._mine:
                raise MemberExistsError(f"candidate {candidate_id!r} is already nominated on this handle")
            candidate = _Candidate(self._coordinator._session, candidate_id, data, self._events)
            self._mine[candidate_id] = candidate
            election = self._state.election(self.service)
            election.candidates.append(candidate)
            self._state.elect(self.service)  # records "acquired" when candidate now leads
            return election.leader is candidate

    def get_leader(self) -> Leader | None:
        self._check_open()
        with self._state.lock:
            self._state.expire_sessions()
            election = self._state.election(self.service)
            if election.leader is None:
                return None
            return Leader(election.leader.id, election.leader.data, election.epoch)

    def resign(self, candidate_id: str) -> None:
        validation.check_id(candidate_id, "candidate_id")
        self._check_open()
        with self._state.lock:
            candidate = self._mine.get(candidate_id)
            election = self._state.election(self.service)
            if candidate is None or election.leader is not candidate:
                return
            del self._mine[candidate_id]
            # Logged before the successor's "acquired", with the same timestamp.
            self._events.record(
                primitive="leader_election", name=self.service, event="resigned", ts=self._state.wall(),
                member=candidate_id, epoch=election.epoch,
            )
            self._state.withdraw(self.service, candidate)

    def is_leader(self, candidate_id: str | None = None) -> bool:
        if self._closed or self._coordinator._session.crashed_at is not None:
            return False
        with self._state.lock:
            leader = self._state.election(self.service).leader
            if leader is None or leader.session is not self._coordinator._session:
                return False
            return candidate_id is None or leader.id == candidate_id

    def add_listener(self, listener: LeaderListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: LeaderListener) -> None:
        self._listeners.remove(listener)

    def close(self) -> None:
        if self._closed:
            return
        with self._state.lock:
            election = self._state.election(self.service)
            for candidate_id in list(self._mine):
                if election.leader is self._mine[candidate_id]:
                    self._events.record(
                        primitive="leader_election", name=self.service, event="resigned", ts=self._state.wall(),
                        member=candidate_id, epoch=election.epoch,
                    )
                self._state.withdraw(self.service, self._mine.pop(candidate_id))
            election.subscriptions = [s for s in election.subscriptions if s.listeners is not self._listeners]
        super().close()


class _MemoryGroup(_Handle, GroupMembership):
    def __init__(self, coordinator: MemoryCoordinator, group: str) -> None:
        super().__init__(coordinator)
        self.group = group
        self._listeners: ListenerSet[set[str]] = ListenerSet()
        self._mine: set[str] = set()
        with self._state.lock:
            self._state.group(group).subscriptions.append(coordinator._subscribe(self._listeners))

    def join(self, member_id: str, data: str = "") -> None:
        validation.check_id(member_id, "member_id")
        validation.check_data(data)
        self._check_open()
        with self._state.lock:
            self._state.expire_sessions()
            group = self._state.group(self.group)
            if member_id in group.members:
                raise MemberExistsError(f"member {member_id!r} is already in group {self.group!r}")
            group.members[member_id] = _Member(self._coordinator._session, data, self._events)
            self._mine.add(member_id)
            _notify(group.subscriptions, set(group.members), self._state.clock.now())
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
        if member is not None and member.session is self._coordinator._session:
            del group.members[member_id]
            _notify(group.subscriptions, set(group.members), self._state.clock.now())
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


def _done(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


class _MemoryStorage(_Handle, Storage):
    def __init__(self, coordinator: MemoryCoordinator, name: str) -> None:
        super().__init__(coordinator)
        self.name = name
        self.max_value_bytes = coordinator._max_value_bytes

    def fetch(self, key: str) -> Future[str | None]:
        versioned = self._read(key)
        return _done(versioned.value if versioned else None)

    def fetch_versioned(self, key: str) -> Future[Versioned | None]:
        return _done(self._read(key))

    def _read(self, key: str) -> Versioned | None:
        validation.check_key(key)
        self._check_open()
        with self._state.lock:
            return self._state.store(self.name).entries.get(key)

    def put(self, key: str, data: str) -> int:
        validation.check_key(key)
        validation.check_value(data, max_bytes=self.max_value_bytes)
        return self._write(key, lambda current: self._create(key, current, data), "put")

    def update(self, key: str, data: str, *, expected_version: int | None = None) -> int:
        validation.check_key(key)
        validation.check_value(data, max_bytes=self.max_value_bytes)
        validation.check_version(expected_version)

        def replace(current: Versioned | None) -> Versioned:
            self._expect(key, current, expected_version)
            assert current is not None
            return Versioned(data, current.version + 1)

        return self._write(key, replace, "updated")

    def delete(self, key: str, *, expected_version: int | None = None) -> None:
        validation.check_key(key)
        validation.check_version(expected_version)

        def remove(current: Versioned | None) -> None:
            self._expect(key, current, expected_version)

        self._write(key, remove, "deleted")

    def children(self, namespace: str = "") -> set[str]:
        validation.check_namespace(namespace)
        self._check_open()
        with self._state.lock:
            return self._state.store(self.name).children(namespace)

    @staticmethod
    def _create(key: str, current: Versioned | None, data: str) -> Versioned:
        if current is not None:
            raise KeyExistsError(f"key {key!r} already exists (version {current.version})")
        return Versioned(data, 1)

    def _expect(self, key: str, current: Versioned | None, expected: int | None) -> None:
        if current is None:
            raise KeyNotFoundError(f"key {key!r} does not exist in store {self.name!r}")
        if expected is not None and current.version != expected:
            self._events.record(
                primitive="kv", name=self.name, event="conflict", ts=self._state.wall(), key=key, version=expected
            )
            raise VersionConflictError(f"key {key!r} is at version {current.version}, not {expected}")

    def _write(self, key: str, change: Callable[[Versioned | None], Versioned | None], event: str) -> int:
        self._check_open()
        with self._state.lock:
            store = self._state.store(self.name)
            watched = list(store.key_set_subscriptions)
            before = {ns: store.children(ns) for ns in watched}
            current = store.entries.get(key)
            new = change(current)
            if new is None:
                del store.entries[key]
            else:
                store.entries[key] = new
            now = self._state.clock.now()
            _notify(store.value_subscriptions.get(key, []), new.value if new else None, now)
            for namespace in watched:
                after = store.children(namespace)
                if after != before[namespace]:
                    _notify(store.key_set_subscriptions[namespace], after, now)
            version = new.version if new else (current.version if current else 0)
            # Under the lock, so one key's events carry increasing timestamps.
            self._events.record(
                primitive="kv", name=self.name, event=event, ts=self._state.wall(now), key=key, version=version
            )
        return version


class _MemoryListenerRegistry(_Handle, ListenerRegistry):
    def __init__(self, coordinator: MemoryCoordinator, name: str) -> None:
        super().__init__(coordinator)
        self.name = name
        self._value_listeners: dict[str, ListenerSet[str | None]] = {}
        self._key_set_listeners: dict[str, ListenerSet[set[str]]] = {}

    def add_value_change_listener(self, key: str, listener: ValueListener) -> None:
        validation.check_key(key)
        self._add(self._value_listeners, key, listener, lambda store: store.value_subscriptions)

    def remove_value_change_listener(self, key: str, listener: ValueListener) -> None:
        validation.check_key(key)
        if key in self._value_listeners:
            self._value_listeners[key].remove(listener)

    def add_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        validation.check_namespace(namespace)
        self._add(self._key_set_listeners, namespace, listener, lambda store: store.key_set_subscriptions)

    def remove_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        validation.check_namespace(namespace)
        if namespace in self._key_set_listeners:
            self._key_set_listeners[namespace].remove(listener)

    def _add(
        self,
        mine: dict[str, ListenerSet[Any]],
        path: str,
        listener: Callable[[Any], None],
        table: Callable[[_Store], dict[str, list[_Subscription]]],
    ) -> None:
        self._check_open()
        with self._state.lock:
            if path not in mine:
                mine[path] = ListenerSet()
                subscription = self._coordinator._subscribe(mine[path])
                table(self._state.store(self.name)).setdefault(path, []).append(subscription)
            mine[path].add(listener)

    def close(self) -> None:
        if self._closed:
            return
        with self._state.lock:
            store = self._state.store(self.name)
            mine = {id(ls) for ls in [*self._value_listeners.values(), *self._key_set_listeners.values()]}
            for table in (store.value_subscriptions, store.key_set_subscriptions):
                for path, subscriptions in table.items():
                    table[path] = [s for s in subscriptions if id(s.listeners) not in mine]
        super().close()


def connect(url: BackendURL, *, history: HistoryTarget = None, **options: Any) -> MemoryCoordinator:
    """The ``kubecoord.backends`` entry point for memory://."""
    session_timeout = float(options.pop("session_timeout", DEFAULT_SESSION_TIMEOUT))
    max_value_bytes = int(options.pop("max_value_bytes", DEFAULT_MAX_VALUE_BYTES))
    clock = options.pop("clock", None)
    if options:
        raise InvalidArgumentError(f"memory backend: unknown options {sorted(options)}")
    if url.path:
        raise InvalidArgumentError(f"memory URL {url.raw!r} takes no path: use memory:// or memory://NAME")
    if session_timeout <= 0 or max_value_bytes <= 0:
        raise InvalidArgumentError("memory backend: session_timeout and max_value_bytes must be positive")
    state = _state_for(url, clock)
    events = open_event_log(history, backend="memory", namespace=url.location)
    return MemoryCoordinator(state, session_timeout=session_timeout, max_value_bytes=max_value_bytes, events=events)
