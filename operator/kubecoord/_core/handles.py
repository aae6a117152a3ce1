"""The handle scaffolding every backend shares, written once: a backend implements only its
storage operations (the ``_``-prefixed hooks) and inherits the rest.

- Closed checks: a closed handle, or a handle of a closed coordinator, raises ClosedError
  from every call that would do something (``_check_open``), with one wording.
- Input validation: every public method checks its arguments (kubecoord.validation) before
  the backend sees them, so every backend refuses bad input with the same typed error and
  before any request.
- Listener sets: each handle type keeps its listeners in ListenerSets and tells the
  backend when one is added (``_listener_added``), e.g. to start a watch.
- History events: ``_record(event, **fields)`` stamps the primitive and the name.
- Client metrics: ``_leadership(candidate, leading)`` updates kubecoord.metrics for the
  handle's backend (the lease core's elector reports on its own).
- Handle tracking: CoordinatorBase validates names, opens handles through the backend's
  hooks and keeps them, newest last, for close(); it makes group coordinator members
  (kubecoord.group_coordinator, over the four primitives) and keeps them too, so that a
  backend's close() lets them leave (on_leave_prepare) before anything else closes.

What the hooks promise is the backend's business; what the public methods promise is
kubecoord.api's docstrings.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar, Unpack

from kubecoord import metrics, validation
from kubecoord._internal.clock import Clock, MonotonicClock
from kubecoord._internal.dispatch import Dispatcher, ListenerSet
from kubecoord.api import (
    Coordinator,
    ElectionTimings,
    Fence,
    GroupCoordinatorHandle,
    GroupCoordinatorOptions,
    GroupMembership,
    GroupProtocol,
    KeySetListener,
    Leader,
    LeaderElection,
    ListenerRegistry,
    Lock,
    Semaphore,
    Storage,
    ValueListener,
    Versioned,
)
from kubecoord.errors import ClosedError, CoordinationError, InvalidArgumentError
from kubecoord.group_coordinator.member import GroupMember
from kubecoord.history import EventLog
from kubecoord.locking import ElectionLock, SlotSemaphore
from kubecoord.wire.events import KV_WRITES, Primitive


class Owner(Protocol):
    """What a handle needs from its coordinator."""

    @property
    def backend(self) -> str: ...

    def check_open(self) -> None:
        """Raise ClosedError if the coordinator was closed (or crashed)."""


class Handle:
    """Closed state, the open check, history events and metrics of one handle."""

    kind: ClassVar[str] = "handle"
    primitive: ClassVar[str] = ""
    name_field: ClassVar[str] = ""
    """The interface's attribute that names this handle's object (LeaderElection.service,
    GroupMembership.group, Storage.name), set here for every backend."""

    def __init__(self, owner: Owner, name: str, events: EventLog) -> None:
        if self.name_field:
            setattr(self, self.name_field, name)
        self._owner = owner
        self._name = name
        self._history = events
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"this {self._owner.backend} {self.kind} handle was closed")
        self._owner.check_open()

    def _check_call(self, member: str, field: str, data: str | None = None) -> None:
        """A member's call checked in one order on every handle: its id (named ``field`` in
        the error), its ``data`` when it carries some, then that the handle is open — a bad
        argument is reported as such even on a closed handle."""
        validation.check_id(member, field)
        if data is not None:
            validation.check_data(data)
        self._check_open()

    def _record(self, event: str, **fields: Any) -> None:
        """One history event of this handle's primitive and name."""
        self._history.record(primitive=self.primitive, name=self._name, event=event, **fields)

    def _leadership(self, candidate: str, leading: bool) -> None:
        """Client metrics: ``candidate`` acquired (True) or lost (False) leadership."""
        metrics.leadership(self._owner.backend, self._name, candidate, leading)

    def close(self) -> None:
        self._closed = True

    def crash(self) -> None:
        """Stop every background activity without writing anything (simulate_crash)."""
        self._closed = True


_V = TypeVar("_V")


class _Listened(Generic[_V]):
    """add_listener/remove_listener of a handle whose listeners take one value (the leader,
    the member set); the backend learns of each addition (``_listener_added``)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._listeners: ListenerSet[_V] = ListenerSet()

    def add_listener(self, listener: Callable[[_V], None]) -> None:
        first = not self._listeners
        self._listeners.add(listener)
        self._listener_added(first)

    def remove_listener(self, listener: Callable[[_V], None]) -> None:
        self._listeners.remove(listener)

    def _listener_added(self, first: bool) -> None:
        """A listener was added (``first``: the set was empty)."""


class ElectionHandle(_Listened[str | None], Handle, LeaderElection):
    kind = "leader election"
    name_field = "service"
    primitive = Primitive.LEADER_ELECTION

    def nominate(self, candidate_id: str, data: str = "") -> bool:
        self._check_call(candidate_id, "candidate_id", data)
        return self._nominate(candidate_id, data)

    def get_leader(self) -> Leader | None:
        self._check_open()
        return self._get_leader()

    def resign(self, candidate_id: str) -> None:
        self._check_call(candidate_id, "candidate_id")
        self._resign(candidate_id)

    @abc.abstractmethod
    def _nominate(self, candidate_id: str, data: str) -> bool: ...

    @abc.abstractmethod
    def _get_leader(self) -> Leader | None: ...

    @abc.abstractmethod
    def _resign(self, candidate_id: str) -> None: ...



class _AliveUntil(Protocol):
    @property
    def alive_until(self) -> float: ...


class _Candidate(Protocol):
    @property
    def id(self) -> str: ...


_C = TypeVar("_C", bound=_Candidate)
_S = TypeVar("_S", bound=_AliveUntil)


class SessionLeadership(Generic[_C, _S]):
    """is_leader() and leading_until() of an election whose candidates lead while one
    session lives (ZooKeeper's session, etcd's lease): ``_holds(candidate)`` judges one
    candidate (its leading flag, the session's generation, the session alive).

    Answered from local state at once and lock-free (a worker may hold the election's lock
    through a slow read; ``list()`` of a dict view is atomic in CPython). leading_until()
    reads the session's ``alive_until`` before and after the check: it grows with answers
    and shrinks only when a new session is granted a shorter life, so the lesser of the
    two is never later than the deadline ``_holds`` answered from."""

    _closed: bool
    _candidates: dict[str, _C]
    _session: _S

    @abc.abstractmethod
    def _holds(self, candidate: _C) -> bool: ...

    def is_leader(self, candidate_id: str | None = None) -> bool:
        if self._closed:
            return False
        candidates = list(self._candidates.values())
        return any(self._holds(c) for c in candidates if candidate_id is None or c.id == candidate_id)

    def leading_until(self, candidate_id: str | None = None) -> float | None:
        if self._closed:
            return None
        before = self._session.alive_until
        if not self.is_leader(candidate_id):
            return None
        return min(before, self._session.alive_until)


class GroupHandle(_Listened[set[str]], Handle, GroupMembership):
    kind = "group membership"
    name_field = "group"
    primitive = Primitive.GROUP

    def join(self, member_id: str, data: str = "") -> None:
        self._check_call(member_id, "member_id", data)
        self._join(member_id, data)

    def leave(self, member_id: str) -> None:
        self._check_call(member_id, "member_id")
        self._leave(member_id)

    def membership(self) -> dict[str, str]:
        self._check_open()
        return self._membership()

    def membership_list(self) -> set[str]:
        self._check_open()
        return self._membership_list()

    @abc.abstractmethod
    def _join(self, member_id: str, data: str) -> None: ...

    @abc.abstractmethod
    def _leave(self, member_id: str) -> None: ...

    @abc.abstractmethod
    def _membership(self) -> dict[str, str]: ...

    def _membership_list(self) -> set[str]:
        return set(self._membership())



def _check_fence(fence: object) -> None:
    """A write's ``fence``: None or a Fence of a valid name and token (before any request)."""
    if fence is None:
        return
    if not isinstance(fence, Fence):
        raise InvalidArgumentError(f"fence must be None or a kubecoord.Fence, got {type(fence).__name__}")
    validation.check_fence(fence.name, fence.token)


class StorageHandle(Handle, Storage):
    kind = "storage"
    name_field = "name"
    primitive = Primitive.KV

    max_value_bytes: int
    """Largest value put/update accept (UTF-8 bytes); the backend sets it."""
    _fencing_epoch: int | None = None

    @property
    def fencing_epoch(self) -> int | None:
        return self._fencing_epoch

    @fencing_epoch.setter
    def fencing_epoch(self, epoch: int | None) -> None:
        self._fencing_epoch = validation.check_epoch(epoch)

    def _record(self, event: str, **fields: Any) -> None:
        # A write made under a leader's epoch carries it into the log (kubecoord.api.Storage).
        if self._fencing_epoch is not None and event in KV_WRITES:
            fields.setdefault("epoch", self._fencing_epoch)
        super()._record(event, **fields)

    def fetch(self, key: str) -> Future[str | None]:
        validation.check_key(key)
        self._check_open()
        return self._fetch(key)

    def fetch_versioned(self, key: str) -> Future[Versioned | None]:
        validation.check_key(key)
        self._check_open()
        return self._fetch_versioned(key)

    def fetch_confirmed(self, key: str, *, max_age: float) -> tuple[Versioned | None, float]:
        validation.check_key(key)
        validation.check_seconds(max_age, "max_age", zero=True)
        self._check_open()
        return self._fetch_confirmed(key, max_age)

    def put(self, key: str, data: str, *, fence: Fence | None = None) -> int:
        validation.check_key(key)
        validation.check_value(data, max_bytes=self.max_value_bytes)
        _check_fence(fence)
        self._check_open()
        return self._put(key, data, fence)

    def update(
        self, key: str, data: str, *, expected_version: int | None = None, fence: Fence | None = None
    ) -> int:
        validation.check_key(key)
        validation.check_value(data, max_bytes=self.max_value_bytes)
        validation.check_version(expected_version)
        _check_fence(fence)
        self._check_open()
        return self._update(key, data, expected_version, fence)

    def delete(self, key: str, *, expected_version: int | None = None, fence: Fence | None = None) -> None:
        validation.check_key(key)
        validation.check_version(expected_version)
        _check_fence(fence)
        self._check_open()
        self._delete(key, expected_version, fence)

    def children(self, namespace: str = "") -> set[str]:
        validation.check_namespace(namespace)
        self._check_open()
        return self._children(namespace)

    def _fetch(self, key: str) -> Future[str | None]:
        """The value only; by default from _fetch_versioned."""
        versioned = self._fetch_versioned(key)
        value: Future[str | None] = Future()

        def done(future: Future[Versioned | None]) -> None:
            error = future.exception()
            if error is not None:
                value.set_exception(error)
            else:
                result = future.result()
                value.set_result(result.value if result is not None else None)

        versioned.add_done_callback(done)
        return value

    def _fetch_confirmed(self, key: str, max_age: float) -> tuple[Versioned | None, float]:
        """By default a read of the server: its evidence is the moment it was sent. A backend
        that serves reads from a cache overrides this."""
        sent = time.monotonic()
        return self._fetch_versioned(key).result(), sent

    @abc.abstractmethod
    def _fetch_versioned(self, key: str) -> Future[Versioned | None]: ...

    @abc.abstractmethod
    def _put(self, key: str, data: str, fence: Fence | None) -> int: ...

    @abc.abstractmethod
    def _update(self, key: str, data: str, expected_version: int | None, fence: Fence | None) -> int: ...

    @abc.abstractmethod
    def _delete(self, key: str, expected_version: int | None, fence: Fence | None) -> None: ...

    @abc.abstractmethod
    def _children(self, namespace: str) -> set[str]: ...


class RegistryHandle(Handle, ListenerRegistry):
    """Listener sets per key and per namespace; the backend watches what they name."""

    kind = "listener registry"
    name_field = "name"
    primitive = Primitive.KV

    def __init__(self, owner: Owner, name: str, events: EventLog) -> None:
        super().__init__(owner, name, events)
        self._values: dict[str, ListenerSet[str | None]] = {}
        self._key_sets: dict[str, ListenerSet[set[str]]] = {}
        self._listeners_lock = threading.Lock()

    def add_value_change_listener(self, key: str, listener: ValueListener) -> None:
        validation.check_key(key)
        self._check_open()
        self._add(self._values, key, listener, self._value_listener_added)

    def remove_value_change_listener(self, key: str, listener: ValueListener) -> None:
        validation.check_key(key)
        self._remove(self._values, key, listener, self._value_listeners_gone)

    def add_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        validation.check_namespace(namespace)
        self._check_open()
        self._add(self._key_sets, namespace, listener, self._key_set_listener_added)

    def remove_key_set_change_listener(self, namespace: str, listener: KeySetListener) -> None:
        validation.check_namespace(namespace)
        self._remove(self._key_sets, namespace, listener, self._key_set_listeners_gone)

    _T = TypeVar("_T")

    def _add(
        self,
        table: dict[str, ListenerSet[_T]],
        path: str,
        listener: Callable[[_T], None],
        added: Callable[[str, ListenerSet[_T], bool], None],
    ) -> None:
        with self._listeners_lock:
            listeners = table.get(path)
            first = listeners is None
            if listeners is None:
                listeners = table[path] = ListenerSet()
            listeners.add(listener)
        try:
            added(path, listeners, first)
        except BaseException:
            if first:  # nothing watches the path: the next listener must try again
                with self._listeners_lock:
                    if table.get(path) is listeners:
                        del table[path]
            raise

    def _remove(
        self,
        table: dict[str, ListenerSet[_T]],
        path: str,
        listener: Callable[[_T], None],
        gone: Callable[[str], None],
    ) -> None:
        with self._listeners_lock:
            listeners = table.get(path)
            if listeners is None:
                return
            listeners.remove(listener)
            if listeners:
                return
            del table[path]
        gone(path)

    def _clear_listeners(self) -> tuple[list[str], list[str]]:
        """Forget every listener (close); the keys and namespaces that had some."""
        with self._listeners_lock:
            keys, namespaces = list(self._values), list(self._key_sets)
            self._values.clear()
            self._key_sets.clear()
        return keys, namespaces

    @abc.abstractmethod
    def _value_listener_added(self, key: str, listeners: ListenerSet[str | None], first: bool) -> None:
        """A listener of ``key`` was added to ``listeners`` (``first``: start watching it)."""

    @abc.abstractmethod
    def _key_set_listener_added(self, namespace: str, listeners: ListenerSet[set[str]], first: bool) -> None:
        """A listener of ``namespace``'s key set was added (``first``: start watching it)."""

    def _value_listeners_gone(self, key: str) -> None:
        """The last listener of ``key`` went."""

    def _key_set_listeners_gone(self, namespace: str) -> None:
        """The last listener of ``namespace`` went."""


class ReadingRegistryHandle(RegistryHandle):
    """A registry whose backend learns of changes by reading the store again (a poll, a
    watched prefix's view), not from one event per change: what each watched key's and
    namespace's listeners last heard, written once.

    A key's baseline (``_hear_value``: a token that changes with every write, and the value)
    and a namespace's (``_hear_key_set``: its children) are taken when its first listener is
    added and forgotten when its last one goes (unless a new first listener was added
    meanwhile: it keeps the baseline it was added with). After a read, ``_changes`` answers the
    listener sets to call: a key's when its token differs from the one heard, a namespace's
    when its children differ; what they hear then becomes the baseline. A key or namespace
    with no baseline yet (its first listener still being added) is passed over: its
    baseline is its own read. Listeners hear the store as of a read, so changes between two
    reads coalesce."""

    def __init__(self, owner: Owner, name: str, events: EventLog) -> None:
        super().__init__(owner, name, events)
        self._heard_lock = threading.Lock()
        self._heard_tokens: dict[str, object] = {}
        self._heard_key_sets: dict[str, frozenset[str]] = {}

    def _hear_value(self, key: str, token: object) -> None:
        with self._heard_lock:
            self._heard_tokens[key] = token

    def _hear_key_set(self, namespace: str, names: set[str] | frozenset[str]) -> None:
        with self._heard_lock:
            self._heard_key_sets[namespace] = frozenset(names)

    def _heard(self) -> tuple[list[str], list[str]]:
        """The keys and namespaces with a baseline: what a read must cover."""
        with self._heard_lock:
            return list(self._heard_tokens), list(self._heard_key_sets)

    def _changes(
        self, values: Mapping[str, tuple[object, str | None]], key_sets: Mapping[str, set[str]]
    ) -> list[tuple[ListenerSet[Any], Any]]:
        """``values``: key -> (token, value) and ``key_sets``: namespace -> children, as one
        read found them (keys and namespaces it did not cover are passed over); the listener
        sets whose key or namespace changed since they last heard, with what they hear now."""
        with self._listeners_lock:
            value_listeners, key_set_listeners = dict(self._values), dict(self._key_sets)
        calls: list[tuple[ListenerSet[Any], Any]] = []
        with self._heard_lock:
            for key, (token, value) in values.items():
                listeners = value_listeners.get(key)
                if listeners is None or key not in self._heard_tokens or self._heard_tokens[key] == token:
                    continue
                self._heard_tokens[key] = token
                calls.append((listeners, value))
            for namespace, names in key_sets.items():
                set_listeners = key_set_listeners.get(namespace)
                now = frozenset(names)
                if set_listeners is None or self._heard_key_sets.get(namespace, now) == now:
                    continue
                self._heard_key_sets[namespace] = now
                calls.append((set_listeners, set(now)))
        return calls

    def _value_listeners_gone(self, key: str) -> None:
        # A first listener added since the last one went keeps the baseline it was added with.
        with self._listeners_lock, self._heard_lock:
            if key not in self._values:
                self._heard_tokens.pop(key, None)

    def _key_set_listeners_gone(self, namespace: str) -> None:
        with self._listeners_lock, self._heard_lock:
            if namespace not in self._key_sets:
                self._heard_key_sets.pop(namespace, None)



class CoordinatorBase(Coordinator):
    """Name validation, handle tracking and the open check of a coordinator; the backend
    opens its handles in the ``_open_*`` hooks (which may return another coordinator's
    handle, e.g. a binding to another backend: only this coordinator's own are tracked)."""

    backend: str

    def __init__(self, handle_owner: Owner | None = None) -> None:
        self._handles: list[Handle] = []
        self._group_members: list[GroupMember] = []
        self._handles_lock = threading.Lock()
        self._handle_owner: object = handle_owner if handle_owner is not None else self
        """What this coordinator's own handles name as their owner (itself unless given)."""

    def leader_election(self, service: str, **timings: Unpack[ElectionTimings]) -> LeaderElection:
        # The timings are kubecoord.api.Coordinator.leader_election's; the backend checks them.
        validation.check_name(service, "service")
        self.check_open()
        given = {name: value for name, value in timings.items() if value is not None}
        return self._track(self._open_leader_election(service, **given))

    def group_membership(self, group: str) -> GroupMembership:
        validation.check_name(group, "group")
        self.check_open()
        return self._track(self._open_group_membership(group))

    def storage(self, name: str) -> Storage:
        validation.check_name(name, "store name")
        self.check_open()
        return self._track(self._open_storage(name))

    def listener_registry(self, name: str) -> ListenerRegistry:
        validation.check_name(name, "store name")
        self.check_open()
        return self._track(self._open_listener_registry(name))

    def lock(self, name: str, *, id: str | None = None, data: str = "") -> Lock:
        return ElectionLock(self, name, holder_id=id, data=data)

    def semaphore(self, name: str, max_leases: int, *, id: str | None = None, data: str = "") -> Semaphore:
        return SlotSemaphore(self, name, max_leases, holder_id=id, data=data)

    def group_coordinator(
        self, group: str, protocol: GroupProtocol, **options: Unpack[GroupCoordinatorOptions]
    ) -> GroupCoordinatorHandle:
        # The options are kubecoord.api.Coordinator.group_coordinator's, checked by GroupMember.
        self.check_open()
        if "clock" in options:
            raise InvalidArgumentError("group_coordinator() takes no clock: members run on their coordinator's")
        member = GroupMember(self, group, protocol, clock=self._clock(), **options)
        with self._handles_lock:
            self._group_members.append(member)
        return member

    def _clock(self) -> Clock:
        """The clock this coordinator's leases and confirmations run on (a backend with a
        test clock returns it)."""
        return MonotonicClock()

    def _close_group_members(self) -> None:
        """KIP-795: a member leaving on close runs on_leave_prepare and gives its units up
        before the group hears it left. First in every backend's close(), while the
        primitives it leaves through are still open."""
        with self._handles_lock:
            members, self._group_members = self._group_members, []
        for member in reversed(members):
            try:
                member.close()
            except CoordinationError as exc:  # the backend is unreachable: leave the rest to expiry
                logging.getLogger("kubecoord").info(
                    "group member could not leave on close", extra={"group": member.group, "error": str(exc)}
                )

    _A = TypeVar("_A")

    def _track(self, handle: _A) -> _A:
        if isinstance(handle, Handle) and handle._owner is self._handle_owner:
            with self._handles_lock:
                # Closed handles need no closing with the coordinator: forget them, so that an
                # application opening and closing handles for hours holds only its open ones.
                self._handles = [h for h in self._handles if not h._closed]
                self._handles.append(handle)
        return handle

    def _tracked(self) -> list[Handle]:
        """This coordinator's handles, oldest first."""
        with self._handles_lock:
            return list(self._handles)

    @abc.abstractmethod
    def check_open(self) -> None:
        """Raise ClosedError if this coordinator was closed (or crashed)."""

    @abc.abstractmethod
    def _open_leader_election(self, service: str, **options: Any) -> LeaderElection: ...

    @abc.abstractmethod
    def _open_group_membership(self, group: str) -> GroupMembership: ...

    @abc.abstractmethod
    def _open_storage(self, name: str) -> Storage: ...

    @abc.abstractmethod
    def _open_listener_registry(self, name: str) -> ListenerRegistry: ...


class HandleTypes(NamedTuple):
    """The classes a ContextHandles coordinator makes its group, store and registry handles
    of, each called with the coordinator's context and a name."""

    group_membership: Callable[[Any, str], GroupMembership]
    storage: Callable[[Any, str], Storage]
    listener_registry: Callable[[Any, str], ListenerRegistry]


class ContextHandles:
    """The group, store and registry hooks of a coordinator whose handles are each made
    from its context (what its handles name as their owner) and a name — memory,
    zookeeper, cassandra: the backend names the three classes (``handle_types``) instead of
    writing the three hooks. Put before CoordinatorBase among the bases."""

    _handle_owner: object
    handle_types: HandleTypes

    def _open_group_membership(self, group: str) -> GroupMembership:
        return self.handle_types.group_membership(self._handle_owner, group)

    def _open_storage(self, name: str) -> Storage:
        return self.handle_types.storage(self._handle_owner, name)

    def _open_listener_registry(self, name: str) -> ListenerRegistry:
        return self.handle_types.listener_registry(self._handle_owner, name)


class _SessionContext(Protocol):
    closed: bool


class _CrashableContext(Protocol):
    closed: bool
    crashed: bool


class _Closable(Protocol):
    def close(self) -> None: ...


class SessionCoordinator(CoordinatorBase):
    """A coordinator over one client session (a kazoo client, a Cassandra driver session):
    its close() — group members leave while the session is open, then every handle closes,
    newest first, then the session, the dispatcher and the event log — written once.

    Concurrent close() calls close once: the first marks the context closed; the others
    return (the group members' leaving runs outside the lock, as it makes requests)."""

    context: _SessionContext
    session: _Closable
    dispatcher: Dispatcher
    crashed: bool

    def __init__(self, handle_owner: Owner | None = None) -> None:
        super().__init__(handle_owner=handle_owner)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self.context.closed:
                return
        self._close_group_members()  # while the session is open: they leave through it
        with self._lock:
            if self.context.closed:
                return
            self.context.closed = True
        for handle in reversed(self._tracked()):
            handle.close()
        self.session.close()
        self.dispatcher.close()
        self.events.close()

    @contextlib.contextmanager
    def _unwound_on_failure(self, *closers: Callable[[], None]) -> Iterator[None]:
        """For a constructor's connecting steps: should one raise, ``closers`` run (in order),
        then the dispatcher and the event log are closed, before the error goes on — the
        caller gets no coordinator to close, so nothing it started may outlive the error."""
        try:
            yield
        except BaseException:
            for close in closers:
                close()
            self.dispatcher.close()
            self.events.close()
            raise

    def _crash_handles(self, context: _CrashableContext) -> bool:
        """The part of a simulated kill -9 that lease-backed backends share: ``context``
        (this coordinator's) marked closed and crashed, every handle stopped without a request
        (``crash()``: no resign, no leave), the dispatcher closed without waiting for what is
        queued. False when the coordinator was closed already (nothing done). The caller then
        drops its session without a goodbye and closes the event log."""
        with self._lock:
            if context.closed:
                return False
            context.closed = True
            context.crashed = self.crashed = True
        for handle in self._tracked():
            handle.crash()
        self.dispatcher.close(timeout=0)
        return True
