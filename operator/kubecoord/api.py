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
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self, TypedDict, TypeVar

from kubecoord import validation
from kubecoord.history import EventLog
from kubecoord.timings import DEFAULT_GROUP_SESSION_TIMEOUT, DEFAULT_REBALANCE_TIMEOUT
from kubecoord.wire import group_record

if TYPE_CHECKING:
    from kubecoord.history import HistoryTarget
    from kubecoord.wire.group_record import GroupState

LeaderListener = Callable[[str | None], None]
"""Called with the new leader's id, or None while there is no (known) leader."""

MembershipListener = Callable[[set[str]], None]
"""Called with the set of live member ids after every change."""

ValueListener = Callable[[str | None], None]
"""Called with a key's new value, or None after it was deleted."""

KeySetListener = Callable[[set[str]], None]
"""Called with the names of a namespace's direct children after every change."""

_T = TypeVar("_T")

LeadingCallback = Callable[[int, threading.Event], object]
"""The runners' work: called with the fencing epoch/token of the term and an event that is
set when the term ends (loss, resign, stop); it should return soon after the event is set."""


@dataclass(frozen=True, slots=True)
class Leader:
    """The current leader of an election as the backend records it."""

    id: str
    data: str
    epoch: int


@dataclass(frozen=True, slots=True)
class LockHolder:
    """A holder of a lock (slot 0) or of one slot of a semaphore, as the backend records it."""

    id: str
    data: str
    token: int
    slot: int = 0


@dataclass(frozen=True, slots=True)
class Versioned:
    """A value with its per-key version (1 after put, +1 on every update)."""

    value: str
    version: int


@dataclass(frozen=True, slots=True)
class Fence:
    """What a fenced write carries: the fencing domain ``name`` (the lock's or election's
    name) and the holder's ``token`` (``Lock.token``, ``Leader.epoch``, the runner's
    ``Holding.token``). See Storage for the rule."""

    name: str
    token: int


RebalanceProtocol = Literal["eager", "cooperative"]
"""How a group hands units on (Kafka's ConsumerPartitionAssignor.RebalanceProtocol).

eager: every member gives up everything in on_join_prepare before the next generation
is assigned. cooperative (KIP-429): members keep their units through a rebalance; the
protocol's assignment never gives a unit to one member while another still reports it
as owned, so a moving unit is revoked in one generation and assigned in the next.
"""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group coordinator's published state (one versioned record; see
    GroupCoordinatorHandle.describe() and Coordinator.describe_group())."""

    group: str
    generation: int
    phase: str
    """"rebalancing" while a generation is being formed, "stable" once it is assigned."""
    protocol_type: str
    protocol: str | None
    leader: str | None
    members: tuple[str, ...]
    assignment: dict[str, bytes]
    """Member id -> assignment bytes of the last stable generation."""
    leader_epoch: int = 0
    """The election epoch of the leader that wrote this generation."""
    joined: tuple[str, ...] = ()
    """Members that ran on_join_prepare for this generation."""
    assigned_by: str | None = None
    """None: the elected member assigns; "operator": the kubecoord operator does."""
    version: int | None = None
    """The record's KV version (it increases on every write of the record)."""

    @classmethod
    def of(cls, group: str, state: GroupState, version: int | None = None) -> GroupDescription:
        """The public view of ``group``'s record as read at ``version``."""
        return cls(
            group=group, generation=state.generation, phase=state.phase, protocol_type=state.protocol_type,
            protocol=state.protocol, leader=state.leader, members=tuple(sorted(state.members)),
            assignment=dict(state.assignment), leader_epoch=state.leader_epoch, joined=tuple(sorted(state.joined)),
            assigned_by=state.assigned_by, version=version,
        )


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
        handle already nominated that id. Whatever it raises (a kubecoord error, or an
        exception from a signal handler or a bug), it leaves nothing registered: the id
        is not nominated on this handle, so nominating it again is not refused; a write
        of its first attempt that was applied unanswered is withdrawn, or expires as
        after a crash (each backend's documentation says which).
        """

    @abc.abstractmethod
    def get_leader(self) -> Leader | None:
        """The current leader as recorded by the backend, or None. Works without nominating."""

    @abc.abstractmethod
    def resign(self, candidate_id: str) -> None:
        """Give up leadership and withdraw the candidacy of ``candidate_id``.

        Another candidate takes over at once (driven by a watch, not a poll). Ignored if
        ``candidate_id`` does not lead; a non-leading candidate stays in the running. A
        candidate counts as leading here while the record names it, even after its own
        renew deadline lapsed (it would take the record back at expiry), and an
        acquisition in flight when resign() is called is waited for and then released.
        """

    @abc.abstractmethod
    def is_leader(self, candidate_id: str | None = None) -> bool:
        """Whether ``candidate_id`` (or any candidate of this handle) leads, in its own view.

        Answered locally from the holder's renew deadline: it turns False when the
        holder has not confirmed its leadership in time, before any other candidate can
        take over.
        """

    @abc.abstractmethod
    def leading_until(self, candidate_id: str | None = None) -> float | None:
        """Until when ``candidate_id`` (or any candidate of this handle) leads in its own view.

        The renew deadline is_leader() is answered from, on the coordinator's clock
        (time.monotonic() unless a test clock was given to connect()); None while it does
        not lead. Answered locally. A renewal moves it later; a loss ends it sooner
        (is_leader() turns False and this turns None). At this time at the latest the
        candidate stops leading in its own view, strictly before any other candidate can
        take over (a Lease's renew deadline is shorter than its duration; a ZooKeeper
        session's proven life is no longer than the session). A process that must stop
        work it cannot watch in-process (a child process, a watchdog) can be told this
        deadline.
        """

    @abc.abstractmethod
    def add_listener(self, listener: LeaderListener) -> None:
        """Call ``listener(leader_id_or_None)`` on every change of leader."""

    @abc.abstractmethod
    def remove_listener(self, listener: LeaderListener) -> None:
        """Stop calling ``listener``. Unknown listeners are ignored."""

    def run(
        self,
        on_started_leading: LeadingCallback,
        on_stopped_leading: Callable[[], object] | None = None,
        *,
        candidate_id: str | None = None,
        data: str = "",
        stop: threading.Event | None = None,
        signals: bool = True,
        check_interval: float = 0.05,
    ) -> None:
        """client-go's RunOrDie: lead, work, stop working before anybody else can lead, repeat.

        Nominates ``candidate_id`` (default host-pid-random) and, each time it leads, calls
        ``on_started_leading(epoch, term_stop)`` on a worker thread. When the term ends —
        leadership lost (is_leader() turned False: the renew deadline passed, the session
        was suspended, the record was taken), ``stop`` set, SIGTERM/SIGINT (``signals``,
        main thread only), this handle or its coordinator closed — ``term_stop`` is set and
        ``on_stopped_leading()`` is called. On a loss both happen as soon as this process
        notices it (within ``check_interval`` of is_leader() turning False, which is before
        any other candidate can acquire); on a voluntary end the worker is waited for and
        the leadership resigned first, so a successor starts after the work stopped.

        The runner re-enters the election after a loss. It returns when ``stop`` is set,
        on a signal, when the handle or coordinator is closed, or when
        ``on_started_leading`` returns (its leadership is then resigned: kazoo's
        ``Election.run``). An exception from ``on_started_leading`` is re-raised after the
        resign. Not guaranteed: that the worker has stopped acting by the time a successor
        leads after a loss (it was frozen, or ignores ``term_stop``): pass the epoch to
        whatever the work writes to — ``store.update(key, value, fence=Fence(service,
        epoch))`` makes a kubecoord store refuse a deposed term's writes (Storage).
        """
        from kubecoord.running.runners import run_election

        run_election(
            self, on_started_leading, on_stopped_leading, candidate_id=candidate_id, data=data, stop=stop,
            signals=signals, check_interval=check_interval,
        )


class Lock(_Closeable):
    """A distributed mutual-exclusion lock with a fencing token (coord.lock(name)).

    One Lock object is one prospective holder with its own id; threads and processes that
    must exclude each other use a Lock object each. Not reentrant: acquire() on an object
    that holds the lock raises LockHeldError (a second thread calling acquire() on the same
    object waits for the first thread's attempt, then gets the same answer). Used as a
    context manager it acquires on entry (blocking) and releases on exit.

    Guarantees (every backend):

    - At most one holder at a time, each in its own view: is_held() turns False before
      any other Lock can acquire (a Lease holder's renew deadline, a ZooKeeper session's
      suspension), as LeaderElection.is_leader() does.
    - ``token`` strictly increases from one acquisition to the next, across holders
      (Kubernetes/memory: the Lease's leaseTransitions; ZooKeeper: the holding znode's
      czxid). Hand it to whatever the critical section writes to, which rejects tokens
      lower than the highest it has seen: that fences a holder frozen past its lease. A
      kubecoord store does with ``fence=Fence(lock_name, token)`` (Storage).
    - Waiting is driven by the backend's watch: a release hands over at once.
    - A crashed holder's lock becomes free when its lease/session expires.

    Not guaranteed: fairness on lease backends (Kubernetes, memory: whoever writes first
    after a release wins); ZooKeeper is FIFO.
    """

    name: str
    id: str
    """This object's holder identity (the Lease's holderIdentity, the znode's data)."""

    @abc.abstractmethod
    def acquire(
        self, timeout: float | None = None, blocking: bool = True, *, cancel: threading.Event | None = None
    ) -> bool:
        """Wait until this object holds the lock; True once it does.

        False after ``timeout`` seconds, at once when ``blocking`` is False and the lock is
        held elsewhere, or when ``cancel`` is set; the attempt is then withdrawn. Raises
        LockHeldError if this object already holds it, and BackendUnavailableError when the
        backend does not answer the attempt's own request to enter (the attempt is withdrawn;
        retrying is the caller's choice).
        """

    @abc.abstractmethod
    def release(self) -> None:
        """Give the lock up; the next waiter takes over at once. Raises LockNotHeldError if
        this object does not hold it (never acquired, released, or lost)."""

    @abc.abstractmethod
    def is_held(self) -> bool:
        """Whether this object holds the lock, in its own view (answered locally)."""

    @abc.abstractmethod
    def held_until(self) -> float | None:
        """Until when this object holds the lock in its own view: the renew deadline of the
        record that holds it (LeaderElection.leading_until()), on the coordinator's clock;
        None while it does not hold it. Answered locally; strictly before anybody else can
        acquire."""

    @property
    @abc.abstractmethod
    def token(self) -> int | None:
        """The fencing token of this object's current hold; None while it does not hold it."""

    @abc.abstractmethod
    def holders(self) -> list[LockHolder]:
        """Who holds the lock as the backend records it (empty when free); works without
        acquiring."""

    def run(
        self,
        fn: Callable[[int, threading.Event], _T],
        *,
        timeout: float | None = None,
        stop: threading.Event | None = None,
        signals: bool = True,
        check_interval: float = 0.05,
    ) -> _T | None:
        """Acquire, call ``fn(token, lost)`` on a worker thread, release; return its result.

        ``lost`` is set as soon as this process notices that the lock was lost (before
        anybody else can acquire) or when ``stop`` is set or a SIGTERM/SIGINT arrives
        (``signals``, main thread only); ``fn`` should return soon after. Returns None
        without calling ``fn`` if the lock was not acquired within ``timeout`` or ``stop``
        was set first. An exception from ``fn`` is re-raised after the release.
        """
        from kubecoord.running.runners import run_lock

        return run_lock(self, fn, timeout=timeout, stop=stop, signals=signals, check_interval=check_interval)

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Release on leaving the block (a lock lost inside it has nothing to release)."""
        if self.is_held():
            self.release()


class Semaphore(Lock):
    """At most ``max_leases`` holders at a time (coord.semaphore(name, max_leases)).

    The Lock interface with N slots: acquire() takes a free slot, ``slot`` says which,
    ``token`` is that slot's fencing token (strictly increasing per slot; slots are
    separate lock records, so tokens of different slots are not ordered). Fence a
    holder's writes per slot: ``fence=Fence(f"{name}-{slot}", token)`` (slot I is the
    lock ``NAME-I``); one domain for all slots would refuse concurrent holders. A crashed
    holder's slot returns when its lease/session expires. Every user of a semaphore must
    pass the same ``max_leases``: a holder with a larger one can take slots the others do
    not know of (a larger count is detected when its slots are held, and refused with
    InvalidArgumentError).
    """

    max_leases: int

    @property
    @abc.abstractmethod
    def slot(self) -> int | None:
        """The slot this object holds (0..max_leases-1), or None."""


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

    Fenced writes: put, update and delete take ``fence=Fence(name, token)``, where
    ``name`` is a lock or election (the fencing domain) and ``token`` the holder's token or
    epoch. The store keeps the highest token it accepted per domain next to the data and
    refuses, with FencedError and nothing written, a write whose token is below it: a
    holder paused past its lease cannot write once its successor has. An equal token is
    accepted (the same holder writes many times); a higher one raises the mark. The check
    and the write are one compare-and-set on the object that holds the key, so the rule
    holds across processes and restarts. The marks' scope is that object: the whole store
    on memory://, zookeeper:// (the store's root znode), cassandra:// (the store's
    partition) and etcd:// (the store's key, ``[PREFIX/]_kubecoord/kv/STORE``); the key's
    ConfigMap shard on kubernetes:// (one shard per 512 KiB of a
    KVStore's sizeLimit — two for the default 1Mi — or the ``kv_shards`` option, 1 by
    default, without one). A key's own writes are always in one scope. Writes without a
    fence are never refused by the marks and leave them alone. Not guaranteed: that marks
    outlive the store's deletion behind its clients' backs (they are deleted with it).
    """

    name: str
    max_value_bytes: int
    """The largest value (UTF-8 bytes) this backend stores; larger raise ValueTooLargeError."""
    fencing_epoch: int | None
    """The leader epoch this handle writes under, None by default. Set it to the epoch of
    the leadership you hold (``store.fencing_epoch = election.get_leader().epoch``) and
    every put/update/delete of this handle is logged with it (the history's ``epoch``),
    so ``kubecoord analyze`` finds a deposed leader's writes after its successor wrote
    (stale_epoch_write). The log only: to have the store refuse a deposed leader's writes,
    pass ``fence=Fence(service, epoch)`` to the write (see above). Setting
    anything but None or an int >= 0 raises InvalidArgumentError."""

    @abc.abstractmethod
    def fetch(self, key: str) -> Future[str | None]:
        """The key's value, or None if absent."""

    @abc.abstractmethod
    def fetch_versioned(self, key: str) -> Future[Versioned | None]:
        """The key's value and version, or None if absent."""

    @abc.abstractmethod
    def fetch_confirmed(self, key: str, *, max_age: float) -> tuple[Versioned | None, float]:
        """The key's value and version as the server itself vouched for them at most
        ``max_age`` seconds ago, with the moment of that evidence on the coordinator's clock
        (time.monotonic() unless a test clock was given to connect()).

        A backend that reads from a cache (Kubernetes' watches) answers from it only while
        its watch heard from the server within ``max_age`` (an event or a bookmark), else it
        asks the server; the others always ask the server (the moment is the request's
        start). ``max_age=0`` asks the server now on every backend: the answer includes
        every write acknowledged before the call, and the moment is the request's start.
        Raises BackendUnavailableError when the server cannot vouch: a client cut off from
        its server never mistakes its cache for the present. The group coordinator's
        members confirm their session with it.
        """

    @abc.abstractmethod
    def put(self, key: str, data: str, *, fence: Fence | None = None) -> int:
        """Create ``key``; returns its version (1). Raises KeyExistsError if present,
        FencedError if ``fence``'s token is below the one its domain's mark holds."""

    @abc.abstractmethod
    def update(
        self, key: str, data: str, *, expected_version: int | None = None, fence: Fence | None = None
    ) -> int:
        """Replace the value of an existing key; returns the new version.

        Raises KeyNotFoundError if absent, VersionConflictError if ``expected_version``
        is given and is not the current version, FencedError if ``fence`` is stale.
        """

    @abc.abstractmethod
    def delete(self, key: str, *, expected_version: int | None = None, fence: Fence | None = None) -> None:
        """Remove ``key``. Raises KeyNotFoundError if absent, VersionConflictError if stale,
        FencedError if ``fence`` is stale."""

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

    close() closes every handle it handed out: group coordinator members leave first
    (on_leave_prepare), then candidates resign and members leave.
    """

    backend: str
    """The backend's URL scheme: "memory", "kubernetes", "zookeeper", ..."""

    events: EventLog = EventLog()
    """The coordination event log this coordinator writes (connect(history=...)); the base
    records nothing. Components built on the coordinator (the group coordinator) log here."""

    @property
    def namespace(self) -> str:
        """The namespace its events name (the event log's ``namespace``): the Kubernetes
        namespace on kubernetes://, "" where the backend has none to name."""
        return ""

    @abc.abstractmethod
    def leader_election(
        self,
        service: str,
        *,
        lease_duration: float | None = None,
        renew_deadline: float | None = None,
        retry_period: float | None = None,
    ) -> LeaderElection:
        """A LeaderElection client for ``service`` (a DNS-1123 label).

        The timings (kubecoord.timings: the same names as connect()'s) replace the
        coordinator's for this handle where given; a backend whose elections live as long as
        a session (zookeeper://) refuses them, naming them (InvalidArgumentError), as every
        backend refuses timings that break the lease rule — before any request."""

    @abc.abstractmethod
    def lock(self, name: str, *, id: str | None = None, data: str = "") -> Lock:
        """A Lock on ``name`` (a DNS-1123 label) for the holder ``id`` (default
        host-pid-random; ids must be unique among the lock's users).

        A lock is held through the leader-election record of the same name (its Lease on
        Kubernetes, /CHROOT/elections/NAME on ZooKeeper), so the election's safety rules
        and its epoch (the token) are the lock's, a client-go LeaseLock on that Lease and a
        kazoo Lock on that path exclude it, and an election of the same name is the same
        lock (kubecoord.locking.ElectionLock, which every kubecoord backend hands out).
        Backends may hand out a native lock instead; the guarantees are kubecoord.api.Lock's.
        """

    @abc.abstractmethod
    def semaphore(self, name: str, max_leases: int, *, id: str | None = None, data: str = "") -> Semaphore:
        """A Semaphore ``name`` with ``max_leases`` slots (slot I is the lock ``NAME-I``)."""

    @abc.abstractmethod
    def group_membership(self, group: str) -> GroupMembership:
        """A GroupMembership client for ``group`` (a DNS-1123 label)."""

    @abc.abstractmethod
    def storage(self, name: str) -> Storage:
        """A Storage client for the store ``name`` (a DNS-1123 label)."""

    @abc.abstractmethod
    def listener_registry(self, name: str) -> ListenerRegistry:
        """A ListenerRegistry over the store ``name``."""

    def describe_group(self, group: str, *, timeout: float | None = None) -> GroupDescription | None:
        """The published state of the group coordinator ``group`` (KIP-795), read without
        joining it: one read of its record (kubecoord.wire.group_record), on every backend.

        None when no member ever joined ``group`` through group_coordinator(). Raises
        InvalidArgumentError for a bad group name, GroupProtocolError for a record of
        another format, TimeoutError when the read takes longer than ``timeout`` seconds.
        Not guaranteed: that the group still looks so when the call returns.
        """
        validation.check_name(group, "group")
        with self.storage(group_record.derived_name(group)) as store:
            versioned = store.fetch_versioned(group_record.STATE_KEY).result(timeout)
        if versioned is None:
            return None
        return GroupDescription.of(group, group_record.decode_state(versioned.value), versioned.version)

    @abc.abstractmethod
    def group_coordinator(
        self,
        group: str,
        protocol: GroupProtocol,
        *,
        member_id: str | None = None,
        session_timeout: float = DEFAULT_GROUP_SESSION_TIMEOUT,
        rebalance_timeout: float = DEFAULT_REBALANCE_TIMEOUT,
        history: HistoryTarget = None,
    ) -> GroupCoordinatorHandle:
        """A member of the group coordinator ``group`` (KIP-795), built on this
        coordinator's membership, election and KV primitives (every kubecoord backend
        makes it with kubecoord.group_coordinator.GroupMember).

        ``member_id`` defaults to host-pid-random. ``session_timeout``: how long this
        member may go without confirming the group's state before it fences itself, and
        how long the leader waits before handing on the units of a member that vanished.
        ``rebalance_timeout``: how long the leader waits for members to join a new
        generation before it drops the laggards. ``history``: an event log path for the
        coordinator's rebalance events (default: this coordinator's own event log).
        Closing the coordinator closes the handle first (on_leave_prepare, then leave).
        """


class ElectionTimings(TypedDict, total=False):
    """Coordinator.leader_election()'s per-handle timings (kubecoord.timings names them),
    for implementations and wrappers that pass them on."""

    lease_duration: float | None
    renew_deadline: float | None
    retry_period: float | None


class GroupCoordinatorOptions(TypedDict, total=False):
    """Coordinator.group_coordinator()'s keyword options, for wrappers that pass them on
    (kubecoord.aio): their meaning and defaults are that method's."""

    member_id: str | None
    session_timeout: float
    rebalance_timeout: float
    history: HistoryTarget


class GroupProtocol(abc.ABC):
    """KIP-795's Coordinator callbacks: what a group member brings to a group coordinator.

    The callbacks run on the handle's own thread, one at a time, never under a backend
    lock. A callback that raises is logged; the member then leaves the generation
    (its ensure_generation() fails) and re-joins.

    Three methods must be given (metadata, perform_assignment, on_join_complete); the
    others are optional hooks whose defaults keep Kafka's AbstractCoordinator behaviour:
    on_join_prepare and on_leave_prepare do nothing, on_lost calls on_join_prepare,
    rejoin_needed says no, units_of cannot tell, accepts_metadata accepts everything,
    join_metadata is metadata(). Override a hook to take part in it.
    """

    protocol_type: str = "consumer"
    """Every member of a group must use the same protocol type (DNS-1123 label)."""

    rebalance_protocol: RebalanceProtocol = "eager"

    @abc.abstractmethod
    def metadata(self) -> list[tuple[str, bytes]]:
        """The protocols this member supports, most preferred first, each with its metadata.

        Called at every rebalance this member takes part in (as a Kafka consumer sends
        its subscription with every JoinGroup): it travels in the group's record, which
        holds every member's metadata and must fit one value of the store.
        """

    def join_metadata(self) -> list[tuple[str, bytes]]:
        """The protocols this member supports, each with the metadata it joins the group
        membership with: at join(), and whenever it joins again after the membership
        lost it (its session expired, its Lease was deleted) — possibly while it owns a
        large share. The leader checks it with accepts_metadata(); the member's
        metadata() replaces it when the member joins a generation, before any assignment.
        The membership caps a member's data at 64 KiB (validation.MAX_DATA_BYTES), so
        this should not grow with what the member owns: say who the member is and what it
        can read, not what it holds. Default: metadata()."""
        return self.metadata()

    def on_join_prepare(self, generation: int, member_id: str) -> None:
        """A rebalance starts: give up what the protocol says to (eager: everything).

        ``generation`` is the member's last generation (-1 before the first).
        """
        return None

    @abc.abstractmethod
    def perform_assignment(
        self, leader_id: str, protocol: str, members_metadata: dict[str, bytes]
    ) -> dict[str, bytes]:
        """Run on the group leader only: the assignment of every member (missing ones get b"")."""

    @abc.abstractmethod
    def on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        """This member's share of ``generation``; work on it may start."""

    def on_leave_prepare(self) -> None:
        """The member is about to leave the group: give everything up."""
        return None

    def on_lost(self, generation: int, member_id: str) -> None:
        """The member learned that a generation went by without it while it held units of
        ``generation`` (its session expired, or the leader excluded it): they are gone,
        give them up without committing (Kafka's onPartitionsLost). Default: on_join_prepare().
        """
        self.on_join_prepare(generation, member_id)

    def rejoin_needed(self) -> bool:
        """Asked of cooperative protocols (KIP-429) only, whenever the member reads the
        group's state outside a rebalance it takes part in: True asks the leader for a
        follow-up rebalance (to hand on what the last one took away). Default: False."""
        return False

    def units_of(self, assignment: bytes) -> list[str] | None:
        """The unit names of one of this protocol's assignments, for the event log's
        ``units`` field; None when the protocol cannot tell (the default). May raise
        CoordinationError on an assignment it cannot read (logged as None)."""
        return None

    def accepts_metadata(self, protocol: str, metadata: bytes) -> bool:
        """Asked on the leader of every other member's metadata for ``protocol``: False
        excludes that member from the group's generations (with one warning) — any process
        can join a group with any data, and one member's malformed metadata must never keep
        the group from being assigned. Default: True (the protocol cannot tell)."""
        return True


class GroupCoordinatorHandle(_Closeable):
    """One member of a group coordinator (KIP-795): generations and assignments.

    Guarantees (every backend): in a generation every unit belongs to at most one
    member; generations increase strictly; eager members give their units up
    (on_join_prepare) before any member receives the next generation's assignment; a
    member that cannot confirm the group's state within its session timeout fails
    ensure_generation() before its units are handed on. close() leaves the group.
    """

    group: str
    member_id: str
    protocol: GroupProtocol

    @abc.abstractmethod
    def join(self, *, timeout: float | None = None) -> None:
        """Join the group. With ``timeout``, wait that long for this member's first
        assignment (RebalanceInProgressError if it has not arrived)."""

    @abc.abstractmethod
    def leave(self) -> None:
        """on_leave_prepare(), then leave the group (a rebalance follows at once)."""

    @property
    @abc.abstractmethod
    def generation(self) -> int:
        """The generation of this member's current assignment; -1 before the first."""

    @property
    @abc.abstractmethod
    def assignment(self) -> bytes | None:
        """This member's assignment in its current generation, or None."""

    @abc.abstractmethod
    def is_stable(self) -> bool:
        """True while this member holds an assignment of the latest generation it saw."""

    @abc.abstractmethod
    def ensure_generation(self, generation: int) -> None:
        """Fencing check before work: raise StaleGenerationError if ``generation`` is not
        this member's current generation or its session could not be confirmed in time,
        RebalanceInProgressError if an eager rebalance is under way."""

    @abc.abstractmethod
    def request_rejoin(self) -> None:
        """Ask the leader for a new generation (KIP-429's follow-up rebalance)."""

    @abc.abstractmethod
    def describe(self) -> GroupDescription | None:
        """The group's published state, or None before the first generation."""
