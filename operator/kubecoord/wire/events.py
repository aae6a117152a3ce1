"""The coordination event log's schema: one definition for its producers and its reader.

Producers (kubecoord.history's event log, written by the backends, the lease core, the
group coordinator and the operator) write these names; the analytics pipeline reads and
checks them. JSON Lines, one event per line; the README has the table of fields.

Schema version 1. Every event has ``v``, ``ts``, ``seq``, ``source``, ``process``,
``backend``, ``namespace``, ``primitive``, ``name`` and ``event``; the other FIELDS are
present where they apply. Pure data: no Spark, no I/O.

Guarantees: a producer writes only the event names of EVENTS under its primitive; a new
event or field is added here first (and to the pipeline's checks), never as a string
literal at the producer. Not guaranteed: that readers of an older schema version accept
a newer one (the pipeline counts events of another ``v`` as malformed).
"""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION: Final = 1
FIELDS: Final = (
    "v", "ts", "seq", "source", "process", "backend", "namespace", "primitive", "name", "event",
    "member", "epoch", "valid_until", "key", "version", "generation", "units", "store_incarnation", "mono", "sent",
)
REQUIRED: Final = ("ts", "process", "namespace", "primitive", "name", "event")
TIME_FIELDS: Final = frozenset({"ts", "valid_until", "sent"})
"""Fields given as UNIX seconds to EventLog.record() and written as RFC 3339 strings."""


SESSION_BACKENDS: Final = ("zookeeper", "etcd")
"""Backends whose leaders are sessions' nodes or keys: no renewals are logged (valid_until
is the session's proven life when the event was logged), and a candidate leads once every
older candidate's node is gone, which is not its own write at that moment. Other processes
may see it lead before its ``acquired`` is stamped: only that event's ``sent`` (its node's
create) bounds the acquisition from below."""


class Source:
    """Who wrote an event (the ``source`` field)."""

    CLIENT: Final = "client"
    OPERATOR: Final = "operator"


class Primitive:
    """The ``primitive`` field: which kind of object an event is about."""

    LEADER_ELECTION: Final = "leader_election"
    GROUP: Final = "group"
    KV: Final = "kv"
    GROUP_COORDINATOR: Final = "group_coordinator"
    """The group coordinator's rebalance events (kubecoord.group_coordinator)."""
    LOCK: Final = "lock"
    SEMAPHORE: Final = "semaphore"
    """Lock and semaphore holds (kubecoord.locking): ``acquired``, ``released``, ``lost`` with the
    holder (member) and its fencing token (epoch; a semaphore's also its ``slot``). A hold is
    also a term of the election record it is held through (the lock's name; slot I of a
    semaphore: NAME-I), whose leader_election events the overlap and epoch checks read: those
    carry valid_until, so they place a frozen holder's end where its own view ended, which a
    ``lost`` logged on waking cannot."""


class Event:
    """The ``event`` field (which primitive writes which: EVENTS)."""

    ACQUIRED: Final = "acquired"
    RENEWED: Final = "renewed"
    LOST: Final = "lost"
    RESIGNED: Final = "resigned"
    OBSERVED: Final = "observed"
    JOINED: Final = "joined"
    LEFT: Final = "left"
    EXPIRED: Final = "expired"
    PUT: Final = "put"
    UPDATED: Final = "updated"
    DELETED: Final = "deleted"
    CONFLICT: Final = "conflict"
    REBALANCE_STARTED: Final = "rebalance_started"
    REBALANCE_COMPLETED: Final = "rebalance_completed"
    ASSIGNED: Final = "assigned"
    REVOKED: Final = "revoked"
    FENCED: Final = "fenced"
    RELEASED: Final = "released"


EVENTS: Final[dict[str, frozenset[str]]] = {
    Primitive.LEADER_ELECTION: frozenset({Event.ACQUIRED, Event.RENEWED, Event.LOST, Event.RESIGNED, Event.OBSERVED}),
    Primitive.GROUP: frozenset({Event.JOINED, Event.RENEWED, Event.LEFT, Event.EXPIRED}),
    Primitive.KV: frozenset({Event.PUT, Event.UPDATED, Event.DELETED, Event.CONFLICT}),
    Primitive.GROUP_COORDINATOR: frozenset({
        Event.REBALANCE_STARTED, Event.REBALANCE_COMPLETED, Event.ASSIGNED, Event.REVOKED, Event.FENCED,
    }),
    Primitive.LOCK: frozenset({Event.ACQUIRED, Event.RELEASED, Event.LOST}),
    Primitive.SEMAPHORE: frozenset({Event.ACQUIRED, Event.RELEASED, Event.LOST}),
}
HOLDER_EVENTS: Final = (Event.ACQUIRED, Event.RENEWED, Event.LOST, Event.RESIGNED)
"""Leader events logged by the holder itself about its own term: they need an epoch."""
TERM_ENDS: Final = (Event.LOST, Event.RESIGNED)
MEMBERSHIP_CHANGES: Final = (Event.JOINED, Event.LEFT, Event.EXPIRED)
DEPARTURES: Final = (Event.LEFT, Event.EXPIRED)
OBSERVERS: Final = (Source.OPERATOR,)
"""Sources that log what they see of members they do not own: the operator's ``joined``
is when it saw a member arrive, not a join of its own (its ``left`` and ``expired`` are
departures it saw, like any observer's expiry)."""
HEARTBEATS: Final = (Event.JOINED, Event.RENEWED)
KV_WRITES: Final = (Event.PUT, Event.UPDATED, Event.DELETED)

VIOLATION_TYPES: Final = (
    "overlapping_leadership", "epoch_not_increasing", "duplicate_member", "version_backwards",
    "lost_update", "create_race", "stale_epoch_write", "unit_owned_twice", "stale_generation_work",
)
"""The pipeline's verdicts (its violations table's ``type``; the summary counts each)."""
