"""The event-log schema as the pipeline reads it (version 1; the README has the table).

Pure data, no Spark: the generator and the readers share it.
"""

from __future__ import annotations

SCHEMA_VERSION = 1
FIELDS = (
    "v", "ts", "seq", "source", "process", "backend", "namespace", "primitive", "name", "event",
    "member", "epoch", "valid_until", "key", "version", "generation", "units", "store_incarnation", "mono", "sent",
)
REQUIRED = ("ts", "process", "namespace", "primitive", "name", "event")

LEADER = "leader_election"
GROUP = "group"
KV = "kv"
COORDINATOR = "group_coordinator"
"""The group coordinator's rebalance events (kubecoord.group_coordinator; checks in analytics.rebalance)."""
LOCK = "lock"
SEMAPHORE = "semaphore"
"""Lock and semaphore holds (kubecoord.locking): ``acquired``, ``released``, ``lost`` with the
holder (member) and its fencing token (epoch; a semaphore's also its ``slot``). A hold is
also a term of the election record it is held through (the lock's name; slot I of a
semaphore: NAME-I), whose leader_election events the overlap and epoch checks read: those
carry valid_until, so they place a frozen holder's end where its own view ended, which a
``lost`` logged on waking cannot."""
EVENTS: dict[str, frozenset[str]] = {
    LEADER: frozenset({"acquired", "renewed", "lost", "resigned", "observed"}),
    GROUP: frozenset({"joined", "renewed", "left", "expired"}),
    KV: frozenset({"put", "updated", "deleted", "conflict"}),
    COORDINATOR: frozenset({"rebalance_started", "rebalance_completed", "assigned", "revoked", "fenced"}),
    LOCK: frozenset({"acquired", "released", "lost"}),
    SEMAPHORE: frozenset({"acquired", "released", "lost"}),
}
HOLDER_EVENTS = ("acquired", "renewed", "lost", "resigned")
"""Leader events logged by the holder itself about its own term: they need an epoch."""
TERM_ENDS = ("lost", "resigned")
MEMBERSHIP_CHANGES = ("joined", "left", "expired")
OBSERVERS = ("operator",)
"""Sources that log what they see of members they do not own: the operator's ``joined``
is when it saw a member arrive, not a join of its own (its ``left`` and ``expired`` are
departures it saw, like any observer's expiry)."""
HEARTBEATS = ("joined", "renewed")
KV_WRITES = ("put", "updated", "deleted")

VIOLATION_TYPES = ("overlapping_leadership", "epoch_not_increasing", "duplicate_member", "version_backwards",
                   "lost_update", "create_race", "stale_epoch_write", "unit_owned_twice", "stale_generation_work")
