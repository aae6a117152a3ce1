"""Every timing's default, written once, and the lease timings' rules (client-go's).

Defaults (used by the backends' connect(), the CRDs' model in kubecoord.resources, the
operator and the command line; tests/timings/test_timings.py checks the CRDs say the same):

=============================  =======  ==================================================
constant                       seconds  what
=============================  =======  ==================================================
DEFAULT_LEASE_DURATION         15       a Lease's duration on kubernetes:// (client-go's);
                                        LeaderElection and Group ``leaseDurationSeconds``
DEFAULT_RENEW_DEADLINE         10       how long a leader acts without a renewal
DEFAULT_RETRY_PERIOD           2        between renewals and member heartbeats
DEFAULT_SESSION_LEASE          10       lease_duration of the session backends (memory://,
                                        zookeeper://, cassandra://, etcd://: kazoo's
                                        session default); the CRDs'
                                        ``sessionTimeoutSeconds``
DEFAULT_RENEW_INTERVAL         5        a Group member Lease's renewal (renewIntervalSeconds)
DEFAULT_GROUP_SESSION_TIMEOUT  10       a group coordinator member's session (KIP-795's
                                        session.timeout.ms; the CRD's sessionTimeoutSeconds
                                        of spec.coordinator)
DEFAULT_REBALANCE_TIMEOUT      30       how long a group leader waits for members to join
DEFAULT_REQUEST_TIMEOUT        5        how long one request of a client may take
                                        (request_timeout of kubernetes:// and etcd://)
=============================  =======  ==================================================

The lease timings' rule:

    lease_duration > renew_deadline > 1.2 x retry_period   (client-go's JitterFactor)

- lease_duration: how long a follower waits, from the moment it observed the last change
  of the record, before it may take over. Written to the Lease as whole seconds
  (leaseDurationSeconds, rounded up so followers never wait less than configured).
- renew_deadline: how long a leader keeps acting without a successful renewal; after it
  the leader reports the loss and stops writing. Must be shorter than lease_duration so
  that the loss is known before anybody else can acquire.
- retry_period: the interval between renewals (and member heartbeats).

The three lease defaults are client-go's. A violated rule raises InvalidArgumentError
at construction, before anything is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kubecoord.errors import InvalidArgumentError

JITTER_FACTOR = 1.2
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
DEFAULT_SESSION_LEASE = 10.0
DEFAULT_RENEW_INTERVAL = 5.0
DEFAULT_GROUP_SESSION_TIMEOUT = 10.0
DEFAULT_REBALANCE_TIMEOUT = 30.0
DEFAULT_REQUEST_TIMEOUT = 5.0


TIMING_NAMES = ("lease_duration", "renew_deadline", "retry_period")
"""The lease timings' names: the same options on every backend's connect() and, per
handle, on every leader_election() that takes them."""


@dataclass(frozen=True, slots=True)
class Timings:
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD

    def __post_init__(self) -> None:
        for field in TIMING_NAMES:
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise InvalidArgumentError(f"{field} must be a positive number of seconds, got {value!r}")
        if not self.lease_duration > self.renew_deadline:
            raise InvalidArgumentError(
                f"lease_duration ({self.lease_duration} s) must be greater than renew_deadline "
                f"({self.renew_deadline} s)"
            )
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period:
            raise InvalidArgumentError(
                f"renew_deadline ({self.renew_deadline} s) must be greater than {JITTER_FACTOR} x retry_period "
                f"({self.retry_period} s)"
            )

    @property
    def lease_duration_seconds(self) -> int:
        """leaseDurationSeconds as written to a Lease: whole seconds, rounded up."""
        return max(1, math.ceil(self.lease_duration))

    def with_overrides(self, **overrides: float | None) -> Timings:
        """These timings with some replaced (per-handle options: lease_duration,
        renew_deadline, retry_period; None keeps the value); validated again.
        InvalidArgumentError names any other option."""
        unknown = sorted(set(overrides) - set(TIMING_NAMES))
        if unknown:
            raise InvalidArgumentError(f"unknown timing options {unknown}; the timings are {list(TIMING_NAMES)}")
        current = {name: getattr(self, name) for name in TIMING_NAMES}
        chosen = {name: current[name] if overrides.get(name) is None else overrides[name] for name in TIMING_NAMES}
        return Timings(**chosen)  # type: ignore[arg-type]  # None replaced above
