"""What one memory://NAME holds: sessions, groups, stores, the election record table and
the clock its electors run on. All group and store mutation happens under ``lock``.

Elections run the lease core (kubecoord._core.lease) over ``records``. Under a manual
clock, ``advance()`` is walked through: the electors step at every moment one of them is
due (a renewal, an expiry) up to the new time, as time passing by would, so a live leader
renews and a crashed one expires exactly on the clock (LeaseClock).
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubecoord import validation
from kubecoord._internal.clock import Clock, MonotonicClock
from kubecoord._internal.dispatch import Dispatcher, ListenerSet
from kubecoord.api import Versioned
from kubecoord.backends.memory.records import RecordTable
from kubecoord.connect import BackendURL
from kubecoord.history import EventLog
from kubecoord.wire.events import Event, Primitive

_session_ids = itertools.count(1)


@dataclass(eq=False)
class Session:
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
class Subscription:
    """A handle's listener set, delivered through that handle's coordinator."""

    session: Session
    dispatcher: Dispatcher
    listeners: ListenerSet[Any]
    events: EventLog


@dataclass(eq=False)
class Member:
    session: Session
    data: str
    events: EventLog


@dataclass(eq=False)
class Group:
    members: dict[str, Member] = field(default_factory=dict)
    subscriptions: list[Subscription] = field(default_factory=list)


@dataclass(eq=False)
class Store:
    entries: dict[str, Versioned] = field(default_factory=dict)
    value_subscriptions: dict[str, list[Subscription]] = field(default_factory=dict)
    key_set_subscriptions: dict[str, list[Subscription]] = field(default_factory=dict)
    fences: dict[str, int] = field(default_factory=dict)
    """The highest token accepted per fencing domain (kubecoord.wire.fences)."""

    def children(self, namespace: str) -> set[str]:
        names = (validation.child_name(namespace, key) for key in self.entries)
        return {name for name in names if name is not None}


class Runner(Protocol):
    """An elector as the walk sees it (leader.Candidate)."""

    due: float

    def step_now(self) -> None:
        """Step once now (waiting for the elector's step lock)."""


class LeaseClock:
    """The clock memory electors run on: the state's clock, except while a manual clock's
    jump is walked through, when it reads the moment being walked."""

    def __init__(self, base: Clock) -> None:
        self._base = base
        self._walking: float | None = None

    def now(self) -> float:
        walking = self._walking
        return self._base.now() if walking is None else walking

    def on_advance(self, callback: Callable[[], None]) -> None:
        self._base.on_advance(callback)

    def walk_to(self, moment: float | None) -> None:
        self._walking = moment


_MAX_WALK_STEPS = 100_000


class State:
    """Everything one memory://NAME holds."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lease_clock = LeaseClock(clock)
        # A manual clock moves only in advance(): electors need no threads of their own,
        # the walk steps them (a monotonic clock moves by itself: each elector has a Loop).
        self.manual = not isinstance(clock, MonotonicClock)
        self.lock = threading.RLock()
        self.records = RecordTable()
        self.groups: dict[str, Group] = {}
        self.stores: dict[str, Store] = {}
        self.crashed: list[Session] = []
        # Nomination order: candidates due at the same moment step in the order they were
        # nominated, so a walk is deterministic (the first nominated follower takes over).
        self._runners: dict[Runner, None] = {}
        self._walk_lock = threading.Lock()  # the runner set
        self._walking = threading.Lock()  # one walk at a time
        self._walked = clock.now()
        # Events are stamped on this state's clock, mapped to wall time once, so a
        # ManualClock yields a consistent history (expiry happens when it advances).
        self.wall_offset = time.time() - clock.now()
        clock.on_advance(self._advanced)

    def wall(self, now: float | None = None) -> float:
        """The wall-clock time of ``now`` on this state's lease clock (default: now)."""
        return (self.lease_clock.now() if now is None else now) + self.wall_offset

    def group(self, name: str) -> Group:
        return self.groups.setdefault(name, Group())

    def store(self, name: str) -> Store:
        return self.stores.setdefault(name, Store())

    # -- electors -----------------------------------------------------------------
    def add_runner(self, runner: Runner) -> None:
        with self._walk_lock:
            self._runners[runner] = None

    def remove_runner(self, runner: Runner) -> None:
        with self._walk_lock:
            self._runners.pop(runner, None)

    def _advanced(self) -> None:
        self.walk()
        self.expire_sessions()

    def walk(self) -> None:
        """Step every elector at each moment one is due, up to the clock's new time."""
        with self._walking:
            target = self.clock.now()
            moment = self._walked
            try:
                for _ in range(_MAX_WALK_STEPS):
                    with self._walk_lock:
                        runners = list(self._runners)
                    due = min((r.due for r in runners), default=math.inf)
                    if due > target:
                        break
                    moment = max(due, moment)
                    self.lease_clock.walk_to(moment)
                    for runner in runners:
                        if runner.due <= moment:
                            runner.step_now()
            finally:
                self.lease_clock.walk_to(None)
                self._walked = max(target, self._walked)

    # -- sessions -----------------------------------------------------------------
    def crash(self, session: Session) -> None:
        with self.lock:
            session.crashed_at = self.clock.now()
            self.crashed.append(session)
        if not self.manual:
            timer = threading.Timer(session.timeout + 0.01, self.expire_sessions)
            timer.daemon = True
            timer.start()

    def expire_sessions(self) -> None:
        """Drop the memberships of crashed sessions whose timeout passed."""
        with self.lock:
            now = self.clock.now()
            expired = [s for s in self.crashed if not s.live(now)]
            if not expired:
                return
            self.crashed = [s for s in self.crashed if s not in expired]
            for name, group in self.groups.items():
                gone = [mid for mid, m in group.members.items() if m.session in expired]
                for member_id in gone:
                    del group.members[member_id]
                    self._record_expiry(group, name, member_id, now)
                if gone:
                    notify(group.subscriptions, set(group.members), now)

    def _record_expiry(self, group: Group, name: str, member_id: str, now: float) -> None:
        """Every live coordinator watching the group logs the expiry it observed (once each)."""
        observers = {id(s.events): s.events for s in group.subscriptions if s.session.live(now)}
        for events in observers.values():
            events.record(
                primitive=Primitive.GROUP, name=name, event=Event.EXPIRED, ts=self.wall(now), member=member_id
            )

    def record_heartbeats(self, session: Session) -> None:
        """Log the last heartbeat of a session's memberships: what a process whose renewal
        loop logged just before kill -9 leaves behind (valid_until = now + lease_duration)."""
        now = self.clock.now()
        until = self.wall(now + session.timeout)
        for name, group in self.groups.items():
            for member_id, member in group.members.items():
                if member.session is session:
                    member.events.record(
                        primitive=Primitive.GROUP, name=name, event=Event.RENEWED, ts=self.wall(now),
                        member=member_id, valid_until=until,
                    )


def notify(subscriptions: list[Subscription], value: object, now: float) -> None:
    for subscription in subscriptions:
        if subscription.session.live(now) and subscription.session.crashed_at is None:
            subscription.dispatcher.notify(subscription.listeners, value)


_shared_states: dict[str, State] = {}
_shared_lock = threading.Lock()


def forget(url: BackendURL) -> None:
    """Drop the shared state of ``url`` (memory://NAME): the next connect to NAME starts empty.
    A coordinator still open on it keeps the old state, shared with no later one."""
    with _shared_lock:
        _shared_states.pop(url.location, None)


def state_for(url: BackendURL, clock: Clock | None) -> State:
    if not url.location:
        return State(clock or MonotonicClock())
    with _shared_lock:
        if url.location not in _shared_states:
            _shared_states[url.location] = State(clock or MonotonicClock())
        return _shared_states[url.location]
