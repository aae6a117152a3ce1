"""GroupMembership on one coordination.k8s.io/v1 Lease per member.

Members renew and expire through the lease core (kubecoord._core.lease): the Lease is
written by the same converter as an election's (wire/lease.py), the heartbeat runs on
the core's Loop and expiry is the core's one rule, expires_at.

Object layout (names from wire/object_names.py): a Lease ``GROUP.m.SLUG-HASH`` labelled
kubecoord.dev/group=GROUP, the exact member id and its data in annotations,
spec.holderIdentity = the member id, renewTime refreshed every retry_period as the
member's heartbeat, leaseDurationSeconds = the coordinator's lease_duration.

Guarantees:
- Membership is the set of the group's member Leases — named after their member id and
  group (object_names.member_id_of; a Lease merely labelled for the group is not one) —
  whose latest version this process observed less
  than leaseDurationSeconds ago (its own monotonic clock; never renewTime vs the local
  wall clock). An expired member disappears from membership() and the listeners at once,
  and whoever notices first deletes its Lease — with a resourceVersion precondition, so a
  member that renewed meanwhile is never deleted. Such a 409 is followed by a GET of the
  Lease (not left to the watch, which may be the reason the view was stale): the fresh
  version counts as observed then, and expiry is judged again from it.
- join() with the id of a live member raises MemberExistsError (create is atomic: two
  sessions racing for one id cannot both succeed); an expired holder of the id is
  replaced, and so is one that nobody renewed for two renew intervals (a
  crashed process restarting under the same id, e.g. a StatefulSet pod, rejoins at once
  instead of after a whole lease, as client-go renews its own holder at once); a live
  duplicate is therefore refused after that short wait. leave() deletes the member's Lease.
- One watch (label selector) per group per coordinator, shared by every use of the handle.

- A member whose Lease was deleted under it (reaped after it stopped renewing, or removed
  by the operator with its Group) is out, like a ZooKeeper session's ephemeral node: its
  heartbeats stop, an "expired" event is recorded, and it is back only after join().

Not guaranteed: that the application learns of its own expulsion other than through the
membership listeners (there is no per-member callback in the interface).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, NamedTuple

from kubecoord._core.handles import GroupHandle
from kubecoord._core.lease import PARKED, LeaderRecord, Loop, Timings, expires_at, from_unix
from kubecoord.backends.kubernetes.cache import Change, Observed
from kubecoord.backends.kubernetes.client import LEASES, AlreadyExists, Conflict, NotFound
from kubecoord.backends.kubernetes.context import KubernetesContext, WatchingHandle
from kubecoord.backends.kubernetes.lease_store import observation
from kubecoord.backends.kubernetes.shared_informer import Informer
from kubecoord.errors import CoordinationError, MemberExistsError, MemberNotFoundError, OutcomeUnknownError
from kubecoord.wire import object_names
from kubecoord.wire.events import Event
from kubecoord.wire.lease import lease_with_record, member_of_lease, record_from_lease

log = logging.getLogger("kubecoord.kubernetes.membership")

_UNSET: Any = object()


def member_of(observed: Observed, group: str) -> tuple[str, str, float] | None:
    """(member id, data, expiry in this process's view) of ``group``'s member Lease; None if
    it is not one (wire.lease.member_of_lease: the name must be the member's own).

    The expiry is the lease core's one rule (expires_at), as for election Leases."""
    member = member_of_lease(observed.obj, group)
    return None if member is None else (*member, expires_at(observation(observed)))


class Judged(NamedTuple):
    """A group's member Leases as judged at one moment of this process's clock."""

    live: dict[str, str]
    """member id -> data of the members alive in this process's observation."""
    expired: list[tuple[str, Observed, str]]
    """(Lease name, the version judged, member id) of the members whose Lease expired."""
    next_expiry: float | None
    """When the earliest live member expires unless renewed (None: no live member)."""


def judge_members(items: dict[str, Observed], group: str, now: float) -> Judged:
    """``group``'s members among the cached Leases ``items``, by the one expiry rule."""
    live: dict[str, str] = {}
    expired: list[tuple[str, Observed, str]] = []
    next_expiry: float | None = None
    for name, observed in items.items():
        member = member_of(observed, group)
        if member is None:
            continue
        if now < member[2]:
            live[member[0]] = member[1]
            next_expiry = member[2] if next_expiry is None else min(next_expiry, member[2])
        else:
            expired.append((name, observed, member[0]))
    return Judged(live, expired, next_expiry)


def reap(context: KubernetesContext, informer: Informer, name: str, observed: Observed, group: str) -> bool | None:
    """Delete the expired member Lease ``name`` over the version judged (a renewal since
    makes that a 409). True when it is gone; False when it was renewed or touched since
    (re-read at once, not left to the watch: a watch gone silent would leave a live member
    out of our view, and its Lease unreaped if it then dies — the fresh version counts as
    observed now and is judged again); when the delete got no answer (a connection a
    middlebox closed, a timeout), the same from a GET of the Lease, and None when that
    cannot tell (the GET failed, or the Lease is still at the version judged): judge it
    again later."""
    try:
        context.client.delete(LEASES, name, resource_version=observed.version)
    except Conflict:
        try:
            informer.refresh(name)
        except CoordinationError as exc:
            log.info("re-reading a member after a failed reap failed", extra={"group": group, "error": str(exc)})
        return False
    except NotFound:
        pass
    except OutcomeUnknownError as exc:
        # Sent, no answer (a kept-alive connection closed under it, a timeout): read the
        # Lease back at once. Gone: reaped (by this delete or another's); renewed since: the
        # delete could not apply; the version judged: judge again later.
        try:
            current = informer.refresh(name)
        except CoordinationError as unread:
            log.info("deleting an expired member got no answer", extra={"group": group, "error": str(unread)})
            return None
        if current is not None:
            return False if current.version != observed.version else None
        log.debug("a reap without an answer was applied", extra={"group": group, "error": str(exc)})
    except CoordinationError as exc:
        log.info("deleting an expired member failed", extra={"group": group, "error": str(exc)})
        return None
    informer.forget(name)
    return True


class KubeGroupMembership(WatchingHandle, GroupHandle):
    _resource = LEASES

    def __init__(self, context: KubernetesContext, group: str, timings: Timings) -> None:
        super().__init__(context, group)
        self.timings = timings
        self._lock = threading.Lock()  # a leaf lock: never held while calling the informer's writers
        self._mine: dict[str, str] = {}  # member id -> data
        self._next_beat = 0.0
        self._reaped: set[tuple[str, str]] = set()
        self._reported: set[str] = _UNSET
        self._loop: Loop | None = None

    # -- the shared watch and the heartbeat/expiry loop ---------------------------------
    def _selector(self) -> dict[str, str]:
        return {"label_selector": object_names.group_selector(self.group)}

    def _on_watching(self, informer: Informer) -> None:
        self._loop = Loop(f"kubecoord-group-{self.group}", self._step)
        self._loop.start()

    def _on_changes(self, changes: list[Change]) -> None:
        if self._loop is not None:
            self._loop.wake()
        self._report()

    def _live(self) -> dict[str, str]:
        """member id -> data of the members alive in this process's observation."""
        informer = self._informer
        if informer is None:
            return {}
        return judge_members(informer.items(), self.group, self._context.clock.now()).live

    def _report(self) -> None:
        with self._lock:
            if self._closed:
                return
            current = set(self._live())
            if current == self._reported:
                return
            self._reported = current
            self._context.dispatcher.notify(self._listeners, current)

    def _step(self) -> float:
        informer = self._informer
        if informer is None or self._closed:
            return self.timings.retry_period
        now = self._context.clock.now()
        # 1. Heartbeats: renew every member this handle holds.
        if now >= self._next_beat:
            self._next_beat = now + self.timings.retry_period
            with self._lock:
                mine = dict(self._mine)
            for member_id, data in mine.items():
                self._heartbeat(informer, member_id, data)
        # 2. Expiry: members not renewed within their lease duration are out of membership;
        #    delete their Lease (before telling our listeners, so that the operator's
        #    watch sees the deletion close to the expiry) over the version we saw expire:
        #    a renewal meanwhile makes that a 409.
        next_expiry = now + self.timings.retry_period
        with self._lock:
            mine_ids = set(self._mine)
        members = 0
        for name, observed in informer.items().items():
            member = member_of(observed, self.group)
            if member is None:
                continue
            members += 1
            expires = member[2]
            if now < expires:
                next_expiry = min(next_expiry, expires)
            elif member[0] not in mine_ids and (name, observed.version) not in self._reaped:
                self._reap(informer, name, observed, member[0])
        self._report()
        if not mine_ids and not members:
            # Nothing to renew, nothing that can expire: only a change (which wakes the loop)
            # brings work, so no step until then. An operator observes thousands of such
            # groups: stepping each every few seconds was what ran per Group while idle.
            return PARKED
        return max(0.0, min(self._next_beat, next_expiry) - self._context.clock.now())

    def _heartbeat(self, informer: Informer, member_id: str, data: str) -> None:
        name = object_names.member_lease_name(self.group, member_id)
        current = informer.get(name)
        if current is None or (member_of(current, self.group) or ("",))[0] != member_id:
            self._expel(member_id, "its Lease is gone")
            return
        body = self._lease_body(member_id, data, base=current.obj)
        try:
            informer.offer(self._context.client.replace(LEASES, name, body))
        except Conflict:
            informer.refresh(name)  # somebody touched it: renew over the new version next time
        except NotFound:
            informer.refresh(name)
            self._expel(member_id, "its Lease was deleted")
        except CoordinationError as exc:
            log.info("member heartbeat failed", extra={"group": self.group, "member": member_id, "error": str(exc)})

    def _expel(self, member_id: str, reason: str) -> None:
        """Our member Lease was deleted — reaped as expired by an observer, or by the operator
        cleaning up its Group: like a ZooKeeper session expiry, the member is out until it
        joins again. Never re-created behind the caller's back."""
        with self._lock:
            if self._mine.pop(member_id, None) is None:
                return
        log.warning("member expelled", extra={"group": self.group, "member": member_id, "reason": reason})
        self._record(Event.EXPIRED, member=member_id)

    def _reap(self, informer: Informer, name: str, observed: Observed, member_id: str) -> None:
        self._reaped.add((name, observed.version))
        gone = reap(self._context, informer, name, observed, self.group)
        if gone is None:
            self._reaped.discard((name, observed.version))  # no answer: judge it again next step
        elif gone:
            self._record(Event.EXPIRED, member=member_id)

    def _lease_body(self, member_id: str, data: str, *, base: dict[str, Any] | None = None) -> dict[str, Any]:
        """A member Lease (new, or ``base`` renewed), written by the same converter as an
        election's: the member is the holder, renewTime its heartbeat."""
        now = from_unix(time.time())
        name = object_names.member_lease_name(self.group, member_id)
        if base is not None:
            renewed = record_from_lease(base)._replace(renew_time=now)
            return lease_with_record(base, renewed, name=name, namespace=self._context.namespace, holder_data=False)
        record = LeaderRecord(
            holder=member_id, lease_duration_seconds=self.timings.lease_duration, acquire_time=now, renew_time=now,
            transitions=0,
        )
        return lease_with_record(
            None, record, name=name, namespace=self._context.namespace,
            labels={object_names.GROUP_LABEL: self.group, object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY},
            annotations={object_names.MEMBER_ID_ANNOTATION: member_id, object_names.MEMBER_DATA_ANNOTATION: data},
            holder_data=False,
        )

    # -- the interface ------------------------------------------------------------------
    def _join(self, member_id: str, data: str) -> None:
        with self._lock:
            if member_id in self._mine:
                raise MemberExistsError(f"member {member_id!r} is already joined through this handle")
        informer = self._watching()
        name = object_names.member_lease_name(self.group, member_id)
        for _ in range(2):
            try:
                written = self._context.client.create(LEASES, self._lease_body(member_id, data))
                break
            except AlreadyExists:
                existing = informer.refresh(name)
                if existing is None:
                    continue  # deleted between our create and our read: try again
                member = member_of(existing, self.group)
                expiry = member[2] if member is not None else existing.seen_at + self.timings.lease_duration_seconds
                if self._context.clock.now() < expiry and self._still_renewed(name, existing.version):
                    raise MemberExistsError(f"member {member_id!r} is already in group {self.group!r}") from None
                # Expired in our observation, or nobody renews it (its process crashed and
                # restarts under the same id, as client-go's candidates renew their own
                # holder at once): delete exactly that version, then create.
                try:
                    self._context.client.delete(LEASES, name, resource_version=existing.version)
                    informer.forget(name)
                except (Conflict, NotFound):
                    informer.refresh(name)
        else:
            raise MemberExistsError(f"member {member_id!r} is already in group {self.group!r}")
        informer.offer(written)  # before the heartbeat loop can look for it
        with self._lock:
            self._mine[member_id] = data
        if self._loop is not None:
            self._loop.wake()  # it may have parked before it saw the new member: heartbeats start now
        self._record(Event.JOINED, member=member_id)
        self._report()

    def _still_renewed(self, name: str, version: str) -> bool:
        """Whether the member Lease ``name`` changes (a live member renews it) within two
        renew intervals of ``version`` (one missed renewal on a loaded machine is no crash).
        A live duplicate id is refused; a Lease nobody renews belongs to a crashed process
        and is taken over without waiting out a lease."""
        deadline = self._context.clock.now() + 2 * self.timings.retry_period
        informer = self._watching()
        while self._context.clock.now() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - self._context.clock.now())))
            current = informer.refresh(name)
            if current is None:
                return False  # it left meanwhile: the join creates the Lease
            if current.version != version:
                return True
        return False

    def _leave(self, member_id: str) -> None:
        with self._lock:
            if member_id not in self._mine:
                raise MemberNotFoundError(f"member {member_id!r} was not joined through this handle")
            data = self._mine.pop(member_id)  # no heartbeat while its Lease is being deleted
        try:
            self._delete_own(member_id)
        except CoordinationError:
            # The Lease is still there (the server did not answer): still a member, as the
            # others see it — keep renewing, and say so by raising; leave() may be retried.
            # (Dropping it here left a member that stopped renewing without a departure in
            # the log, and its next join looked like a duplicate.)
            with self._lock:
                self._mine.setdefault(member_id, data)
            raise
        self._report()

    def _delete_own(self, member_id: str) -> None:
        informer = self._informer
        if informer is None:
            return
        name = object_names.member_lease_name(self.group, member_id)
        for _ in range(3):
            current = informer.get(name)
            if current is None or member_of(current, self.group) is None:
                break
            try:
                self._context.client.delete(LEASES, name, resource_version=current.version)
                break
            except Conflict:
                informer.refresh(name)
            except NotFound:
                break
        informer.forget(name)
        self._record(Event.LEFT, member=member_id)

    def _membership(self) -> dict[str, str]:
        self._watching()
        return self._live()

    def close(self) -> None:
        if self._closed:
            return
        if self._loop is not None:
            self._loop.stop()
        with self._lock:
            mine = list(self._mine)
            self._mine.clear()
        for member_id in mine:
            try:
                self._delete_own(member_id)
            except CoordinationError as exc:
                log.info("leave on close failed", extra={"group": self.group, "member": member_id, "error": str(exc)})
        self._report()
        self._closed = True
        self._stop_watching()

    def crash(self) -> None:
        self._closed = True
        if self._loop is not None:
            self._loop.stop()
        self._stop_watching()
