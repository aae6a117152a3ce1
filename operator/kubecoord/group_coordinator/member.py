"""GroupMember: one member of a group coordinator, over the KIP-30 primitives only.

Usage::

    with kubecoord.connect("memory://demo") as coord:
        member = coord.group_coordinator("workers", UnitsProtocol(units), member_id="w1")
        member.join(timeout=30)
        member.ensure_generation(member.generation)   # before acting on a unit

What it uses of the coordinator it was made from (so it runs on every backend):

- group membership ``GROUP``: the member joins with its protocol type and protocols as
  data; liveness (and expiry after a crash) is the backend's;
- leader election ``GROUP-gc``: every member is a candidate; the leader runs the
  decisions of kubecoord.group_coordinator.leading and perform_assignment();
- store ``GROUP-gc``, key ``coordinator/state``: the generation record
  (kubecoord.group_coordinator.record), written only by compare-and-set; a member joins a
  generation by adding itself to ``joined`` with its fresh metadata;
- a value listener on that key, and polling every session_timeout/4, which is also how
  a member confirms its session: ensure_generation() fails once no read of the record
  succeeded for ``session_timeout``.

All callbacks and all writes happen on one worker thread per member; listeners only wake
it. Not guaranteed: on Kubernetes reads come from the store's watch cache, so "confirmed"
means the watch was delivering (bookmarks keep it honest) rather than a fresh quorum read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kubecoord import validation
from kubecoord.api import Coordinator, GroupCoordinatorHandle, GroupDescription, GroupProtocol
from kubecoord.errors import (
    BackendUnavailableError,
    ClosedError,
    CoordinationError,
    GroupProtocolError,
    InvalidArgumentError,
    MemberExistsError,
    MemberNotFoundError,
    RebalanceInProgressError,
    StaleGenerationError,
    VersionConflictError,
)
from kubecoord.group_coordinator.leading import Decision, LeaderTimers, decide
from kubecoord.group_coordinator.record import (
    REBALANCING,
    STABLE,
    STATE_KEY,
    GroupState,
    Protocols,
    check_protocols,
    decode_join_data,
    decode_state,
    derived_name,
    encode_join_data,
    encode_state,
    publish,
)
from kubecoord.history import HistoryTarget, open_event_log

log = logging.getLogger("kubecoord.coordinator")

NO_GENERATION = -1


def default_member_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class GroupMember(GroupCoordinatorHandle):
    """See the module docstring; made by Coordinator.group_coordinator()."""

    def __init__(
        self,
        coordinator: Coordinator,
        group: str,
        protocol: GroupProtocol,
        *,
        member_id: str | None = None,
        session_timeout: float = 10.0,
        rebalance_timeout: float = 30.0,
        history: HistoryTarget = None,
    ) -> None:
        self.group = validation.check_name(group, "group")
        self.member_id = validation.check_id(member_id or default_member_id(), "member_id")
        if not isinstance(protocol, GroupProtocol):
            raise InvalidArgumentError("protocol must be a kubecoord.api.GroupProtocol")
        validation.check_name(protocol.protocol_type, "protocol_type")
        if protocol.rebalance_protocol not in ("eager", "cooperative"):
            raise InvalidArgumentError(
                f"rebalance_protocol must be 'eager' or 'cooperative', not {protocol.rebalance_protocol!r}"
            )
        if not session_timeout > 0 or not rebalance_timeout > 0:
            raise InvalidArgumentError("session_timeout and rebalance_timeout must be positive")
        self.protocol = protocol
        self.session_timeout = float(session_timeout)
        self.rebalance_timeout = float(rebalance_timeout)
        self._cooperative = protocol.rebalance_protocol == "cooperative"
        self._coordinator = coordinator
        self._service = derived_name(group)
        # Rebalance events go to the coordinator's own log unless a target is given here.
        self._owns_events = history is not None
        self._events = (
            open_event_log(history, backend=coordinator.backend, namespace=str(getattr(coordinator, "namespace", "")))
            if history is not None
            else coordinator.events
        )
        self._membership = coordinator.group_membership(group)
        self._election = coordinator.leader_election(self._service)
        self._store = coordinator.storage(self._service)
        self._registry = coordinator.listener_registry(self._service)

        self._lock = threading.Condition()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._joined = False
        self._leaving = False  # leave() started and its membership leave has not succeeded yet
        self._withdrawn = False  # leave() closed the election handle; join() opens a new one
        self._members_seen: frozenset[str] | None = None  # the membership listener's last view
        # The member's view, guarded by _lock.
        self._generation = NO_GENERATION
        self._assignment: bytes | None = None
        self._protocol_name: str | None = None
        self._prepared = NO_GENERATION  # last generation whose on_join_prepare ran
        self._joined_generation = NO_GENERATION  # last generation this member joined in the record
        self._latest: GroupState | None = None
        self._confirmed_at = float("-inf")
        self._timers = LeaderTimers()
        self._wake_at: float | None = None

    # -- public surface -----------------------------------------------------------------
    def join(self, *, timeout: float | None = None) -> None:
        with self._lock:
            if self._closed:
                raise ClosedError("this group coordinator handle was closed")
            if self._joined:
                raise InvalidArgumentError(f"member {self.member_id!r} already joined group {self.group!r}")
            if self._leaving:
                raise InvalidArgumentError(f"member {self.member_id!r} is still leaving: call leave() again first")
        data = self._join_data()  # checked before any request
        self._members_seen = None
        if self._withdrawn:  # a leave() closed the election handle to withdraw the candidacy
            self._election = self._coordinator.leader_election(self._service)
            self._withdrawn = False
        self._registry.add_value_change_listener(STATE_KEY, self._poke)
        self._membership.add_listener(self._on_members)
        self._election.add_listener(self._poke)
        self._membership.join(self.member_id, data=data)
        try:
            self._election.nominate(self.member_id)
        except CoordinationError:
            # Half-joined: undo the membership join. If the undo fails too, the member stays
            # "leaving" (join() refuses, leave() retries), never in the group unnoticed.
            with self._lock:
                self._leaving = True
            with contextlib.suppress(CoordinationError):
                self.leave()
            raise
        with self._lock:
            self._joined = True
        self._thread = threading.Thread(target=self._run, name=f"kubecoord-group-{self.group}", daemon=True)
        self._thread.start()
        if timeout is not None and not self.wait_stable(timeout):
            raise RebalanceInProgressError(f"member {self.member_id!r} got no assignment within {timeout} s")

    def wait_stable(self, timeout: float) -> bool:
        """Wait until this member holds an assignment of the latest generation it saw."""
        with self._lock:
            return self._lock.wait_for(self._stable_locked, timeout)

    def leave(self) -> None:
        """Revoke, withdraw the candidacy, then leave the membership. If the backend refuses
        the membership leave (a server that does not answer), this raises: the member is
        still in the group as the others see it (the backend keeps its session), no longer
        takes part, and leave() again retries; close() gives up and lets the session expire."""
        with self._lock:
            if not self._joined and not self._leaving:
                return
            first_attempt, self._joined, self._leaving = self._joined, False, True
        if first_attempt:
            self._withdraw()
        if not self._withdrawn:
            # Closing the handle withdraws the candidacy whether it leads or not (resign()
            # leaves a candidate that does not lead in the running: it could win later and
            # lead a group it is no longer in, with no worker to act for it).
            self._withdrawn = True
            try:
                self._election.close()
            except CoordinationError as exc:
                log.info("withdrawing the candidacy failed", extra={"group": self.group, "error": str(exc)})
        with contextlib.suppress(MemberNotFoundError):  # already out: expelled after its session expired
            self._membership.leave(self.member_id)
        with self._lock:
            self._leaving = False

    def _withdraw(self) -> None:
        """Stop taking part: on_leave_prepare, revoke what is held, release it in the record."""
        self._stop_worker()
        self._callback("on_leave_prepare", self.protocol.on_leave_prepare)
        with self._lock:
            held, self._assignment = self._assignment, None
            generation = self._generation
            self._generation = NO_GENERATION
            self._lock.notify_all()
        if held is not None:
            self._record("revoked", generation=generation, reason="leave", units=self._units(held))
        # Tell the leader nothing of ours needs fencing, then go: a rebalance follows.
        try:
            self._update(self._release)
        except CoordinationError as exc:
            log.info("could not release before leaving; the leader waits out the session", extra={"error": str(exc)})

    def _release(self, state: GroupState) -> GroupState | None:
        if self.member_id not in state.holders:
            return None
        return state.evolve(holders=state.holders - {self.member_id})

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
        try:
            self.leave()
        except ClosedError:
            pass
        except CoordinationError as exc:
            log.warning("leave on close failed; the member expires after its session",
                        extra={"group": self.group, "member": self.member_id, "error": str(exc)})
        with self._lock:
            self._closed = True
        self._stop_worker()
        for handle in (self._registry, self._election, self._membership, self._store):
            with contextlib.suppress(CoordinationError):
                handle.close()
        if self._owns_events:
            self._events.close()

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    @property
    def assignment(self) -> bytes | None:
        with self._lock:
            return self._assignment

    @property
    def protocol_name(self) -> str | None:
        """The protocol the group chose for the current generation."""
        with self._lock:
            return self._protocol_name

    def is_stable(self) -> bool:
        with self._lock:
            return self._stable_locked() and self._confirmed_locked()

    def ensure_generation(self, generation: int) -> None:
        with self._lock:
            if not self._joined or self._generation == NO_GENERATION or generation != self._generation:
                raise StaleGenerationError(
                    f"generation {generation} is not member {self.member_id!r}'s current generation {self._generation}"
                )
            if not self._confirmed_locked():
                raise StaleGenerationError(
                    f"member {self.member_id!r} has not confirmed group {self.group!r} for {self.session_timeout} s"
                )
            latest = self._latest
            if latest is not None and latest.generation > self._generation:
                if not self._cooperative:
                    raise RebalanceInProgressError(
                        f"group {self.group!r} is rebalancing to generation {latest.generation}"
                    )
                if self.member_id not in latest.members:
                    raise StaleGenerationError(f"member {self.member_id!r} is not in generation {latest.generation}")

    def request_rejoin(self) -> None:
        self._update(lambda s: None if s.rejoin else s.evolve(rejoin=True))

    def describe(self) -> GroupDescription | None:
        versioned = self._store.fetch_versioned(STATE_KEY).result()
        if versioned is None:
            return None
        state = decode_state(versioned.value)
        return describe_state(self.group, state)

    # -- the worker ---------------------------------------------------------------------
    def _poke(self, _value: Any = None) -> None:
        self._wake.set()

    def _on_members(self, members: set[str]) -> None:
        self._members_seen = frozenset(members)
        self._wake.set()

    def _rejoin_if_expelled(self) -> None:
        """Join the membership again once it is gone while this member is joined: its
        session expired (a pause, a partition) or its Lease was deleted, and the leader has
        excluded it. Kafka's consumer rejoins the same way when the coordinator no longer
        knows its member id; without this the member would sit out for good. A view that is
        merely behind (the backend still holds the member) makes the join raise
        MemberExistsError, which changes nothing."""
        seen = self._members_seen
        if seen is None or self.member_id in seen:
            return
        try:
            self._membership.join(self.member_id, data=self._join_data())
        except MemberExistsError:
            return
        log.warning("joined again after the membership was lost", extra={"group": self.group, "member": self.member_id})

    def _join_data(self) -> str:
        """The membership data: the protocol type and this member's protocols."""
        return encode_join_data(self.protocol.protocol_type, check_protocols(self.protocol.metadata()))

    def _stop_worker(self) -> None:
        thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.session_timeout + self.rebalance_timeout)

    def _run(self) -> None:
        interval = self.session_timeout / 4
        while True:
            with self._lock:
                if not self._joined or self._closed:
                    return
                wake_at = self._wake_at
            timeout = interval if wake_at is None else max(0.0, min(interval, wake_at - time.monotonic()))
            self._wake.wait(timeout)
            self._wake.clear()
            try:
                self._step()
            except ClosedError:
                return
            except BackendUnavailableError as exc:
                log.debug("group step failed; retrying", extra={"group": self.group, "error": str(exc)})
            except CoordinationError as exc:
                log.warning("group step failed; retrying", extra={"group": self.group, "error": str(exc)})

    def _step(self) -> None:
        """Read the record, act as a member, then as the leader; again while anything was written."""
        self._rejoin_if_expelled()
        for _ in range(20):
            with self._lock:
                if not self._joined:
                    return
            read_at = time.monotonic()
            versioned = self._store.fetch_versioned(STATE_KEY).result()
            state = decode_state(versioned.value) if versioned is not None else None
            with self._lock:
                if state is None or self._latest is None or state.generation >= self._latest.generation:
                    self._latest = state
                self._confirmed_at = read_at
                self._lock.notify_all()
            wrote = False
            if state is not None:
                wrote = self._member_step(state)
            if not wrote and self._election.is_leader(self.member_id):
                wrote = self._leader_step(state, None if versioned is None else versioned.version)
            if not wrote:
                return
        self._wake.set()

    # -- member ---------------------------------------------------------------------------
    def _member_step(self, state: GroupState) -> bool:
        me = self.member_id
        with self._lock:
            generation, held = self._generation, self._assignment is not None
        if state.phase == REBALANCING and state.generation > self._joined_generation:
            involved = me in state.members or me in state.excluded or me in state.holders
            if not involved:
                return False
            if self._prepared < state.generation:
                self._prepare(generation, held, state.generation)
            return self._join_generation(state.generation)
        if state.phase == STABLE and state.generation > generation:
            if me in state.members and self._prepared >= state.generation:
                self._complete(state)
                if self._cooperative and self.protocol_rejoin_needed():
                    return self._update(lambda s: None if s.rejoin else s.evolve(rejoin=True))
                return False
            if held:  # a generation went by without this member: what it held is gone
                self._lose(generation)
            return False
        if self._cooperative and self.protocol_rejoin_needed():
            return self._update(lambda s: None if s.rejoin else s.evolve(rejoin=True))
        return False

    def protocol_rejoin_needed(self) -> bool:
        check: Callable[[], bool] | None = getattr(self.protocol, "rejoin_needed", None)
        return bool(check()) if check is not None else False

    def _prepare(self, generation: int, held: bool, next_generation: int) -> None:
        self._record("rebalance_started", generation=next_generation)
        self._callback("on_join_prepare", self.protocol.on_join_prepare, generation, self.member_id)
        self._prepared = next_generation
        if not self._cooperative:
            with self._lock:
                released, self._assignment = self._assignment, None
                self._lock.notify_all()
            if held and released is not None:
                self._record("revoked", generation=generation, reason="rebalance", units=self._units(released))

    def _join_generation(self, generation: int) -> bool:
        protocols = check_protocols(self.protocol.metadata())
        me = self.member_id

        def join(s: GroupState) -> GroupState | None:
            if s.generation != generation or s.phase != REBALANCING:
                return None
            if me in s.joined and (me not in s.members or s.members[me] == protocols):
                return None  # already joined (a write reported as failed may have applied)
            members = dict(s.members)
            if me in members:
                members[me] = protocols
            holders = s.holders - {me} if not self._cooperative else s.holders
            return s.evolve(members=members, joined=s.joined | {me}, holders=holders, excluded=s.excluded - {me})

        wrote = self._update(join)
        with self._lock:
            latest = self._latest
        if wrote or (latest is not None and me in latest.joined and latest.generation == generation):
            self._joined_generation = generation
        return wrote

    def _complete(self, state: GroupState) -> None:
        assignment = state.assignment.get(self.member_id, b"")
        protocol = state.protocol or ""
        with self._lock:
            before = self._assignment
        if self._cooperative and before is not None:
            # KIP-429: what the new generation takes away is revoked first (logged first).
            gone = [u for u in self._units(before) or [] if u not in set(self._units(assignment) or [])]
            if gone:
                self._record("revoked", generation=self._generation, reason="rebalance", units=gone)
        self._callback(
            "on_join_complete", self.protocol.on_join_complete, state.generation, self.member_id, protocol, assignment
        )
        with self._lock:
            self._generation = state.generation
            self._assignment = assignment
            self._protocol_name = state.protocol
            self._lock.notify_all()
        self._record("assigned", generation=state.generation, protocol=protocol, units=self._units(assignment))

    def _lose(self, generation: int) -> None:
        with self._lock:
            held = self._assignment
        lost = getattr(self.protocol, "on_lost", None)
        if lost is not None:
            self._callback("on_lost", lost, generation, self.member_id)
        else:
            self._callback("on_join_prepare", self.protocol.on_join_prepare, generation, self.member_id)
        with self._lock:
            self._assignment = None
            self._generation = NO_GENERATION
            self._lock.notify_all()
        self._record("revoked", generation=generation, reason="lost", units=self._units(held))

    # -- leader ---------------------------------------------------------------------------
    def _leader_step(self, state: GroupState | None, version: int | None) -> bool:
        leader = self._election.get_leader()
        if leader is None or leader.id != self.member_id:
            return False
        if state is not None and state.leader_epoch > leader.epoch:
            return False  # a newer leader wrote already; this view is stale
        if state is not None and state.assigned_by is not None:
            return False  # the operator assigns this group (Group spec.assignment)
        live: dict[str, Protocols] = {}
        for member, data in self._membership.membership().items():
            decoded = decode_join_data(data)
            if decoded is None:
                continue
            if decoded[0] != self.protocol.protocol_type:
                log.warning("member of another protocol type ignored", extra={"group": self.group, "member": member})
                continue
            live[member] = decoded[1]
        base = state or GroupState(generation=0, phase=STABLE, protocol_type=self.protocol.protocol_type)
        now = time.monotonic()
        try:
            decision = decide(
                base, live, leader_id=self.member_id, epoch=leader.epoch, now=now, wall=time.time(),
                timers=self._timers, session_timeout=self.session_timeout,
                rebalance_timeout=self.rebalance_timeout, assign=self._assign,
            )
        except GroupProtocolError as exc:
            log.error("cannot assign the group", extra={"group": self.group, "error": str(exc)})
            return False
        with self._lock:
            self._wake_at = None if decision.wake_in is None else now + decision.wake_in
        return self._publish(decision, version, base.holders)

    def _assign(self, protocol: str, metadata: dict[str, bytes]) -> dict[str, bytes]:
        result = self.protocol.perform_assignment(self.member_id, protocol, metadata)
        if not isinstance(result, dict):
            raise GroupProtocolError("perform_assignment() must return a dict of member id -> bytes")
        for member, assignment in result.items():
            if member not in metadata:
                raise GroupProtocolError(f"perform_assignment() assigned to {member!r}, not a member")
            if not isinstance(assignment, bytes | bytearray):
                raise GroupProtocolError(f"perform_assignment() gave {member!r} a {type(assignment).__name__}")
        return {m: bytes(a) for m, a in result.items()}

    def _publish(self, decision: Decision, version: int | None, holders: frozenset[str]) -> bool:
        if decision.state is None:
            return False
        if not publish(self._store, decision.state, version):
            return True  # someone wrote first: read again
        # Holders the leader dropped are departed members it fenced (session_timeout passed
        # since a record without them): from here on their units may move. A killed member
        # logs nothing more, so this is the event that ends what it held.
        for fenced in sorted(holders - decision.state.holders):
            self._record("fenced", member=fenced, generation=decision.state.generation, role="leader")
        if decision.kind == "rebalance":
            self._record("rebalance_started", generation=decision.state.generation, role="leader",
                         members=sorted(decision.state.members))
        elif decision.kind == "complete":
            self._record("rebalance_completed", generation=decision.state.generation, role="leader",
                         protocol=decision.state.protocol)
        return True

    # -- helpers ----------------------------------------------------------------------------
    def _update(self, change: Callable[[GroupState], GroupState | None]) -> bool:
        """Compare-and-set ``change`` onto the record until it applies or declines (None)."""
        for _ in range(50):
            versioned = self._store.fetch_versioned(STATE_KEY).result()
            if versioned is None:
                return False
            new = change(decode_state(versioned.value))
            if new is None:
                return False
            try:
                self._store.update(STATE_KEY, encode_state(new), expected_version=versioned.version)
                return True
            except VersionConflictError:
                time.sleep(0.005)
        raise BackendUnavailableError(f"group {self.group!r}: the state record kept changing under 50 writes")

    def _callback(self, name: str, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # a user's callback must not stop the member
            log.exception("group protocol callback raised", extra={"group": self.group, "callback": name})

    def _units(self, assignment: bytes | None) -> list[str] | None:
        """The unit names of an assignment, when the protocol can tell (UnitsProtocol can)."""
        decode: Callable[[bytes], list[str]] | None = getattr(self.protocol, "units_of", None)
        if decode is None or assignment is None:
            return None
        try:
            return decode(assignment)
        except CoordinationError:
            return None

    def _record(self, event: str, **fields: Any) -> None:
        fields.setdefault("member", self.member_id)
        self._events.record(primitive="group_coordinator", name=self.group, event=event, **fields)

    def _stable_locked(self) -> bool:
        latest = self._latest
        return (
            self._assignment is not None
            and latest is not None
            and (latest.generation == self._generation or (self._cooperative and self.member_id in latest.members))
        )

    def _confirmed_locked(self) -> bool:
        return time.monotonic() - self._confirmed_at <= self.session_timeout


def describe_state(group: str, state: GroupState) -> GroupDescription:
    return GroupDescription(
        group=group, generation=state.generation, phase=state.phase, protocol_type=state.protocol_type,
        protocol=state.protocol, leader=state.leader, members=tuple(sorted(state.members)),
        assignment=dict(state.assignment),
    )
