"""GroupMember: one member of a group coordinator, over the KIP-30 primitives only.

Usage::

    with kubecoord.connect("memory://demo") as coord:
        member = coord.group_coordinator("workers", UnitsProtocol(units), member_id="w1")
        member.join(timeout=30)
        member.ensure_generation(member.generation)   # before acting on a unit

What it uses of the coordinator it was made from (so it runs on every backend):

- group membership ``GROUP``: the member joins with its protocol type and protocols as
  data (rejoin.py); liveness (and expiry after a crash) is the backend's;
- leader election ``GROUP-gc``: every member is a candidate; the leader runs the
  decisions of kubecoord.group_coordinator.leading and perform_assignment()
  (leader_duties.py);
- store ``GROUP-gc``, key ``coordinator/state``: the generation record
  (kubecoord.group_coordinator.record), written only by compare-and-set; a member joins a
  generation by adding itself to ``joined`` with its fresh metadata (following.py);
- a value listener on that key, and polling every session_timeout/4, which is also how
  a member confirms its session: ensure_generation() fails once the server has not
  vouched for the member's read of the record for ``session_timeout``
  (Storage.fetch_confirmed: a watch event or bookmark, or a fresh read — never a cache
  that a held connection keeps looking current).

This module is the handle: its lifecycle (join, leave, close), its public reads of the
member's view (view.py) and the step its worker thread (worker.py) runs on every wake.
All callbacks and all writes happen on that one thread per member; listeners only wake
it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from typing import Any, Unpack

from kubecoord import validation
from kubecoord._internal.clock import Clock, MonotonicClock
from kubecoord.api import (
    Coordinator,
    GroupCoordinatorHandle,
    GroupCoordinatorOptions,
    GroupDescription,
    GroupProtocol,
)
from kubecoord.errors import (
    ClosedError,
    CoordinationError,
    InvalidArgumentError,
    MemberNotFoundError,
    RebalanceInProgressError,
    StaleGenerationError,
)
from kubecoord.group_coordinator.context import MemberContext
from kubecoord.group_coordinator.following import Follower
from kubecoord.group_coordinator.leader_duties import LeaderDuties
from kubecoord.group_coordinator.rejoin import Rejoiner, join_data
from kubecoord.group_coordinator.view import NO_GENERATION
from kubecoord.group_coordinator.worker import MemberWorker
from kubecoord.history import open_event_log
from kubecoord.timings import DEFAULT_GROUP_SESSION_TIMEOUT, DEFAULT_REBALANCE_TIMEOUT
from kubecoord.wire.group_record import STATE_KEY, decode_state, derived_name

log = logging.getLogger("kubecoord.coordinator")


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
        clock: Clock | None = None,
        **options: Unpack[GroupCoordinatorOptions],
    ) -> None:
        """``options`` are Coordinator.group_coordinator()'s (kubecoord.api says what they
        mean; any other name is refused). ``clock`` is the coordinator's (its maker passes
        it: a test's ManualClock on memory://), on which confirmations and the leader's
        timers are measured."""
        unknown = sorted(set(options) - set(GroupCoordinatorOptions.__annotations__))
        if unknown:
            raise InvalidArgumentError(f"group_coordinator: unknown options {unknown}")
        member_id = options.get("member_id")
        session_timeout = options.get("session_timeout", DEFAULT_GROUP_SESSION_TIMEOUT)
        rebalance_timeout = options.get("rebalance_timeout", DEFAULT_REBALANCE_TIMEOUT)
        history = options.get("history")
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
            open_event_log(history, backend=coordinator.backend, namespace=coordinator.namespace)
            if history is not None
            else coordinator.events
        )
        self._membership = coordinator.group_membership(group)
        self._election = coordinator.leader_election(self._service)
        self._store = coordinator.storage(self._service)
        self._registry = coordinator.listener_registry(self._service)

        self._context = MemberContext(
            group=self.group, member_id=self.member_id, protocol=protocol, store=self._store, events=self._events,
            session_timeout=self.session_timeout, rebalance_timeout=self.rebalance_timeout,
            clock=clock or MonotonicClock(),
        )
        self._view = self._context.view
        self._lock = self._view.lock  # guards the view and the flags below
        self._follower = Follower(self._context)
        self._leader = LeaderDuties(self._context, self._membership)
        self._worker = MemberWorker(
            self.group, interval=self.session_timeout / 4, step=self._step, running=self._running,
            wake_at=self._leader_wake_at, clock=self._view.clock,
        )
        self._rejoiner = Rejoiner(self._context, self._membership, wake=self._worker.wake)
        self._closed = False
        self._joined = False
        self._leaving = False  # leave() started and its membership leave has not succeeded yet
        self._withdrawn = False  # leave() closed the election handle; join() opens a new one

    # -- public surface -----------------------------------------------------------------
    def join(self, *, timeout: float | None = None) -> None:
        with self._lock:
            if self._closed:
                raise ClosedError("this group coordinator handle was closed")
            if self._joined:
                raise InvalidArgumentError(f"member {self.member_id!r} already joined group {self.group!r}")
            if self._leaving:
                raise InvalidArgumentError(f"member {self.member_id!r} is still leaving: call leave() again first")
        data = join_data(self.protocol)  # checked before any request
        self._rejoiner.reset()
        if self._withdrawn:  # a leave() closed the election handle to withdraw the candidacy
            self._election = self._coordinator.leader_election(self._service)
            self._withdrawn = False
        self._registry.add_value_change_listener(STATE_KEY, self._poke)
        self._membership.add_listener(self._rejoiner.on_members)
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
        self._worker.start()
        if timeout is not None and not self.wait_stable(timeout):
            raise RebalanceInProgressError(f"member {self.member_id!r} got no assignment within {timeout} s")

    def wait_stable(self, timeout: float) -> bool:
        """Wait until this member holds an assignment of the latest generation it saw."""
        with self._lock:
            return self._lock.wait_for(self._view.stable, timeout)

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
            self._stop_worker()
            self._follower.leave()
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
            return self._view.generation

    @property
    def assignment(self) -> bytes | None:
        with self._lock:
            return self._view.assignment

    @property
    def protocol_name(self) -> str | None:
        """The protocol the group chose for the current generation."""
        with self._lock:
            return self._view.protocol_name

    def is_stable(self) -> bool:
        with self._lock:
            return self._view.stable() and self._view.confirmed()

    def ensure_generation(self, generation: int) -> None:
        with self._lock:
            current = self._view.generation
            if not self._joined or current == NO_GENERATION or generation != current:
                raise StaleGenerationError(
                    f"generation {generation} is not member {self.member_id!r}'s current generation {current}"
                )
            if not self._view.confirmed():
                raise StaleGenerationError(
                    f"member {self.member_id!r} has not confirmed group {self.group!r} for {self.session_timeout} s"
                )
            latest = self._view.latest
            if latest is not None and latest.generation > current:
                if not self._cooperative:
                    raise RebalanceInProgressError(
                        f"group {self.group!r} is rebalancing to generation {latest.generation}"
                    )
                if self.member_id not in latest.members:
                    raise StaleGenerationError(f"member {self.member_id!r} is not in generation {latest.generation}")

    def request_rejoin(self) -> None:
        self._context.ask_rejoin()

    def describe(self) -> GroupDescription | None:
        versioned = self._store.fetch_versioned(STATE_KEY).result()
        if versioned is None:
            return None
        return GroupDescription.of(self.group, decode_state(versioned.value), versioned.version)

    # -- the worker's step ----------------------------------------------------------------
    def _poke(self, _value: Any = None) -> None:
        self._worker.wake()

    def _running(self) -> bool:
        with self._lock:
            return self._joined and not self._closed

    def _leader_wake_at(self) -> float | None:
        with self._lock:
            return self._leader.wake_at

    def _stop_worker(self) -> None:
        self._worker.stop(self.session_timeout + self.rebalance_timeout)

    def _step(self) -> None:
        """Read the record, act as a member, then as the leader; again while anything was written."""
        self._rejoiner.rejoin_if_expelled()
        for _ in range(20):
            with self._lock:
                if not self._joined:
                    return
            # The server's word, not a cache's: a member cut off from its server must stop
            # counting itself confirmed before the leader fences it (session_timeout).
            versioned, read_at = self._store.fetch_confirmed(STATE_KEY, max_age=self.session_timeout / 2)
            state = decode_state(versioned.value) if versioned is not None else None
            self._view.observe(state, read_at)
            wrote = False
            if state is not None:
                wrote = self._follower.step(state)
            if not wrote and self._election.is_leader(self.member_id):
                wrote = self._leader.step(self._election, state, None if versioned is None else versioned.version)
            if not wrote:
                return
        self._worker.wake()
