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
lease_duration     10.0         seconds after a crash until the session's leadership
                                and memberships expire (kubecoord.timings.DEFAULT_SESSION_LEASE)
renew_deadline     0.9 x lease  seconds a leader acts without a successful renewal
retry_period       0.4 x lease  seconds between renewals
clock              monotonic    a kubecoord.testing.ManualClock makes expiry
                                deterministic (elections, memberships, and group
                                members' confirmations and leader timers); shared
                                states keep the first clock
max_value_bytes    1 MiB        largest value a store accepts
=================  ===========  ======================================================

``leader_election(name)`` also takes lease_duration / renew_deadline / retry_period per
handle.

Elections have real lease semantics: every candidate runs the lease core's Elector
(kubecoord._core.lease, the same as kubernetes://) over an in-process record table with
compare-and-set (records.py), with the timings above (validated as kubecoord.timings.Timings
is): by default a leader renews every 0.4 of ``lease_duration`` and counts as leader until 0.9
of it after its last renewal; a follower
takes over a released record at once and a held one ``lease_duration`` after it last saw
it change. The epoch is the record's transitions (+1 on every acquisition). Under a
ManualClock, advance() is walked through: electors step at every moment one is due, so
live leaders renew and crashed ones expire exactly on the clock, without threads.

A session that stops without closing (simulate_crash(), the in-process analogue of kill
-9) renews its leaderships once more and stops: they expire ``lease_duration`` later;
its memberships last that long after the crash, as a ZooKeeper session's would.

Event log (``history=``): events are stamped on the state's clock mapped to wall time,
so a ManualClock gives a consistent history. Elections log what the lease core logs
(``acquired`` and ``renewed`` with valid_until = the renew deadline, ``resigned``,
``lost``); simulate_crash() logs the memberships' last heartbeat (``renewed``) as a
process whose renewal loop logged just before kill -9 would; an expired membership is
logged as ``expired`` by every live coordinator watching that group.

Modules: coordinator.py (sessions of one coordinator, handles), state.py (what a
memory://NAME holds; the manual-clock walk), records.py (the record table), leader.py,
membership.py, kv.py (the handles), handle.py (their shared base).
"""

from __future__ import annotations

from typing import Any

from kubecoord.backends.memory.coordinator import MemoryCoordinator, lease_timings
from kubecoord.backends.memory.state import state_for
from kubecoord.connect import BackendURL
from kubecoord.errors import InvalidArgumentError
from kubecoord.history import HistoryTarget, open_event_log
from kubecoord.timings import DEFAULT_SESSION_LEASE

DEFAULT_MAX_VALUE_BYTES = 1024 * 1024

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "MemoryCoordinator", "connect"]


def connect(url: BackendURL, *, history: HistoryTarget = None, **options: Any) -> MemoryCoordinator:
    """The ``kubecoord.backends`` entry point for memory://."""
    lease_duration = options.pop("lease_duration", DEFAULT_SESSION_LEASE)
    renew_deadline = options.pop("renew_deadline", None)
    retry_period = options.pop("retry_period", None)
    max_value_bytes = int(options.pop("max_value_bytes", DEFAULT_MAX_VALUE_BYTES))
    clock = options.pop("clock", None)
    if options:
        raise InvalidArgumentError(f"memory backend: unknown options {sorted(options)}")
    if url.path:
        raise InvalidArgumentError(f"memory URL {url.raw!r} takes no path: use memory:// or memory://NAME")
    if max_value_bytes <= 0:
        raise InvalidArgumentError("memory backend: max_value_bytes must be positive")
    timings = lease_timings(lease_duration, renew_deadline=renew_deadline, retry_period=retry_period)
    state = state_for(url, clock)
    events = open_event_log(history, backend="memory", namespace=url.location)
    return MemoryCoordinator(state, timings=timings, max_value_bytes=max_value_bytes, events=events)
