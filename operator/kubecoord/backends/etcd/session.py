"""The one etcd lease of a coordinator, kept alive on one thread (etcd's concurrency.Session).

Every key this coordinator owns for its lifetime — election candidates, lock waiters,
group members, the markers of its writes (outcomes.py) — is attached to this lease, so a
crashed process loses them all when the lease's TTL runs out, and close() revokes it.

Liveness rule (the one every primitive uses): a keep-alive *sent* at ``t`` and answered
with a positive TTL proves the lease alive on the server until at least ``t + TTL``;
``alive_until`` is ``t + renew_deadline`` with ``renew_deadline < TTL - 1`` (options.py),
on the monotonic clock. A holder's is_leader()/is_held() is answered from it, so it turns
False before the server can expire the lease, given clocks that tick at similar rates.

When a keep-alive answers that the lease is gone (it expired: the process was frozen or
cut off longer than the TTL), the session grants a new lease and tells its subscribers
(``on_new_lease``): elections re-enter their candidates with new keys, groups re-join.

Not guaranteed: anything if etcd's members' clocks run much faster than this host's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kubecoord._internal.subscribers import Subscribers
from kubecoord.backends.etcd.options import Options
from kubecoord.backends.etcd.transport import GatewayError, Transport, Unanswered
from kubecoord.errors import BackendUnavailableError, CoordinationError

log = logging.getLogger("kubecoord.etcd")

LeaseListener = Callable[[int], None]


class LeaseSession:
    """A lease granted at construction and kept alive until close() or crash()."""

    def __init__(self, transport: Transport, options: Options, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.transport = transport
        self._keepalives = transport.sibling(timeout=max(0.2, min(options.request_timeout, options.deadline / 3)))
        self._options = options
        self._clock = clock
        self._lock = threading.Lock()
        self._subscribers: Subscribers[int] = Subscribers(log, "etcd new-lease subscriber failed")
        self._stop = threading.Event()
        self.lease_id = 0
        self.alive_until = 0.0
        self.proven_until = 0.0
        """``t + TTL`` of the latest answered keep-alive (or the grant) sent at ``t``: the server
        keeps the lease, and every key on it, at least until then (monotonic clock)."""
        self.generation = 0
        """Bumped with every new lease (a lost lease's keys are gone)."""
        self.granted_ttl = 0
        self.granted_at = 0.0
        """Monotonic time (this session's clock) before the current lease's grant was sent:
        no key on it is older."""
        self._grant()
        self._thread = threading.Thread(target=self._run, name=f"kubecoord-etcd-lease-{self.lease_hex}", daemon=True)
        self._thread.start()

    @property
    def lease_hex(self) -> str:
        """The lease id as etcd's concurrency package names keys: lowercase hex."""
        return format(self.lease_id, "x")

    def alive(self) -> bool:
        return not self._stop.is_set() and self._clock() < self.alive_until

    def subscribe(self, listener: LeaseListener) -> None:
        self._subscribers.add(listener)

    def unsubscribe(self, listener: LeaseListener) -> None:
        self._subscribers.discard(listener)

    def _grant(self) -> None:
        sent = self._clock()
        try:
            grant = {"TTL": self._options.lease_duration, "ID": 0}
            answer = self.transport.call("lease/grant", grant, idempotent=False)
        except Unanswered as exc:  # a lease granted unanswered holds no key and expires unused
            raise BackendUnavailableError(f"etcd: no answer to a lease grant ({exc})") from None
        except GatewayError as exc:
            raise CoordinationError(f"etcd refused a lease grant: {exc.message}") from None
        ttl = int(answer.get("TTL", 0))
        if ttl - 1 <= self._options.deadline:
            # etcd raises TTLs below its minimum (1.5 election timeouts); never lower them.
            raise CoordinationError(f"etcd granted a lease of {ttl} s, too short for renew_deadline "
                                    f"{self._options.deadline} s")
        with self._lock:
            self.lease_id = int(answer["ID"])
            self.granted_ttl, self.granted_at = ttl, sent
            self.alive_until = sent + self._options.deadline
            self.proven_until = sent + ttl
            self.generation += 1

    def _run(self) -> None:
        while not self._stop.wait(self._options.period):
            sent = self._clock()
            lease = self.lease_id
            try:
                answer = self._keepalives.call("lease/keepalive", {"ID": lease}, idempotent=True)
            except (BackendUnavailableError, GatewayError) as exc:
                log.debug("etcd keep-alive failed", extra={"lease": format(lease, "x"), "error": str(exc)})
                continue
            except CoordinationError as exc:
                log.warning("etcd keep-alive refused", extra={"lease": format(lease, "x"), "error": str(exc)})
                continue
            ttl = int(answer.get("result", {}).get("TTL", -1))
            if ttl > 0:
                with self._lock:
                    if self.lease_id == lease:
                        self.alive_until = max(self.alive_until, sent + self._options.deadline)
                        self.proven_until = max(self.proven_until, sent + ttl)
                continue
            self._replace(lease)

    def _replace(self, lost: int) -> None:
        """The lease expired on the server: grant a new one and tell the subscribers."""
        log.warning("etcd lease expired; granting a new one", extra={"lease": format(lost, "x")})
        with self._lock:
            self.alive_until = 0.0
        while not self._stop.is_set():
            try:
                self._grant()
                break
            except CoordinationError as exc:
                log.debug("etcd lease grant failed", extra={"error": str(exc)})
                if self._stop.wait(self._options.period):
                    return
        else:
            return
        self._subscribers.tell(self.lease_id)

    def close(self, *, revoke: bool) -> None:
        """Stop keeping the lease alive; ``revoke``: delete it (and every key on it) now."""
        self._stop.set()
        self.alive_until = 0.0
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=self._options.request_timeout + 1)
        if revoke:
            try:
                self.transport.call("lease/revoke", {"ID": self.lease_id}, idempotent=True)
            except (CoordinationError, GatewayError) as exc:
                log.info("etcd lease not revoked; it expires by its TTL", extra={"error": str(exc)})
        self._keepalives.close()
