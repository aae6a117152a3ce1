"""The keyspace and tables of cassandra://, created if absent, with a schema version.

``ensure(session, options)`` reads ``kubecoord_schema`` first: when the keyspace already
holds this schema version nothing else is sent (connect() stays cheap); otherwise it
creates the keyspace (replication from the options), the tables, adds kubecoord's columns
to a ``leader_election`` table the seed plugin created, and records the version. A newer
schema version than this client knows fails connect() with UnsupportedFeatureError. With
``create_schema=False`` nothing is created and a missing schema is an error.

Not guaranteed: that many clients creating the same schema at the same moment on a fresh
multi-node cluster agree on the tables (Cassandra's schema changes are not serialised
before 5.1). Create it once (an operator, an administrator, or one first client), or run
the servers with ``-Dcassandra.use_deterministic_table_id=true`` as the test servers do.
"""

from __future__ import annotations

import re

from kubecoord.backends.cassandra.options import Options
from kubecoord.backends.cassandra.session import Session
from kubecoord.errors import CoordinationError, InvalidArgumentError, UnsupportedFeatureError

SCHEMA_VERSION = 3
"""1: the tables below without ``kv_entries.fences`` and ``kv_entries.created``; 2: with
``fences`` (the marks of fenced writes, kubecoord.wire.fences); 3: with ``created`` too (the
id of the put that made a key's row, which tells a key's incarnations apart). A keyspace of
an older version is brought to 3 by adding the columns it lacks; rows written before have
no ``created`` (null), which the store reads as "incarnation unknown"."""
SEED_TTL = 2
"""The seed plugin's ``default_time_to_live``: its own writes rely on it to expire."""
_KEYSPACE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")

TABLES = [
    "CREATE TABLE IF NOT EXISTS {ks}.kubecoord_schema (component text PRIMARY KEY, version int)",
    "CREATE TABLE IF NOT EXISTS {ks}.leader_election (resource text PRIMARY KEY, owner text, sup_data text, "
    "tenure uuid, epoch bigint, nonce uuid) WITH default_time_to_live = " + str(SEED_TTL),
    "CREATE TABLE IF NOT EXISTS {ks}.leader_epochs (resource text PRIMARY KEY, epoch bigint, tenure uuid)",
    "CREATE TABLE IF NOT EXISTS {ks}.group_members (grp text, member text, data text, session uuid, nonce uuid, "
    "PRIMARY KEY ((grp), member))",
    "CREATE TABLE IF NOT EXISTS {ks}.kv_entries (store text, key text, value text, version bigint, nonce uuid, "
    "created uuid, changed uuid STATIC, incarnation uuid STATIC, fences map<text, bigint> STATIC, "
    "PRIMARY KEY ((store), key))",
]
OUR_ELECTION_COLUMNS = {"tenure": "uuid", "epoch": "bigint", "nonce": "uuid"}
ADDED_KV_COLUMNS = {"fences": "map<text, bigint> STATIC", "created": "uuid"}
"""Columns of ``kv_entries`` added after schema version 1 (``fences`` in 2, ``created`` in 3: a
table made by an older version lacks them)."""


def check_keyspace(path: str) -> str:
    if not _KEYSPACE.match(path):
        raise InvalidArgumentError(
            f"cassandra URL keyspace {path!r} must match [A-Za-z][A-Za-z0-9_]{{0,47}}, "
            "e.g. cassandra://db1:9042,db2/coordination"
        )
    return path


def _installed_version(session: Session) -> int | None:
    try:
        rows = session.execute(
            f"SELECT version FROM {session.keyspace}.kubecoord_schema WHERE component = 'kubecoord'", prepared=False
        )
    except InvalidArgumentError:  # no such keyspace or table yet
        return None
    return rows[0].version if rows else None


def _columns(session: Session, table: str) -> set[str]:
    return {
        row.column_name
        for row in session.execute(
            "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
            [session.keyspace, table], prepared=False,
        )
    }


def ensure(session: Session, options: Options) -> None:
    ks = session.keyspace
    installed = _installed_version(session)
    if installed is not None and installed > SCHEMA_VERSION:
        raise UnsupportedFeatureError(
            "cassandra", f"keyspace {ks!r}'s schema version {installed} (this client knows {SCHEMA_VERSION})"
        )
    if installed == SCHEMA_VERSION:
        return
    if not options.create_schema:
        raise CoordinationError(f"cassandra backend: keyspace {ks!r} has no kubecoord schema and create_schema=False")
    replication = ", ".join(f"'{key}': '{value}'" for key, value in options.replication_map.items())
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{{replication}}}", prepared=False, timeout=60
    )
    for statement in TABLES:
        session.execute(statement.format(ks=ks), prepared=False, timeout=60)
    present = {
        row.column_name
        for row in session.execute(
            "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'leader_election'",
            [ks], prepared=False,
        )
    }
    for column, kind in OUR_ELECTION_COLUMNS.items():
        if column not in present:  # a seed plugin's table: add ours beside its columns
            session.execute(f"ALTER TABLE {ks}.leader_election ADD {column} {kind}", prepared=False, timeout=60)
    for column, kind in ADDED_KV_COLUMNS.items():
        if column in _columns(session, "kv_entries"):
            continue
        try:
            session.execute(f"ALTER TABLE {ks}.kv_entries ADD {column} {kind}", prepared=False, timeout=60)
        except CoordinationError:
            if column not in _columns(session, "kv_entries"):
                raise
            # Another client upgrading the same keyspace added it first.
    session.execute(
        f"INSERT INTO {ks}.kubecoord_schema (component, version) VALUES ('kubecoord', {SCHEMA_VERSION})",
        prepared=False, timeout=30,
    )
