"""One driver Cluster and Session per coordinator: prepared statements, consistency levels,
timeouts, error translation, and compare-and-set with unknown outcomes resolved.

Consistency: plain reads and LWT commits use ``consistency`` (QUORUM by default: a read
overlaps the replicas every acknowledged LWT committed to); the Paxos phase of every LWT,
and the reads that decide something after an LWT's outcome was unknown or a conflict was
seen, use ``serial_consistency`` (SERIAL by default), which also finishes any Paxos round
left half-way by a crashed writer before answering. Paxos v2 is the server's choice
(cassandra.yaml ``paxos_variant: v2``, Cassandra 4.1+); nothing here depends on it.

Guarantees: an LWT is sent once. When its outcome is unknown (a CAS write timeout, no
answer in time, the connection lost after sending), ``cas`` asks the caller's ``resolve``
(a SERIAL read: did our write land?) and never retries blindly; if that read fails too,
the call fails with OutcomeUnknownError: the write may or may not have happened.
Driver exceptions never reach a caller (errors.py).
"""

from __future__ import annotations

import logging
import ssl as ssl_module
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import ConstantReconnectionPolicy, RoundRobinPolicy
from cassandra.query import PreparedStatement

from kubecoord.backends.cassandra.errors import UNKNOWN_OUTCOME, translate, translating
from kubecoord.backends.cassandra.options import Options
from kubecoord.errors import BackendUnavailableError, ClosedError, InvalidArgumentError, OutcomeUnknownError

log = logging.getLogger("kubecoord.cassandra")


@dataclass(frozen=True, slots=True)
class CasResult:
    """An LWT's answer: applied, and (when not applied and the server said) the row it saw."""

    applied: bool
    existing: dict[str, Any] | None


class Session:
    def __init__(self, contact_points: Sequence[tuple[str, int]], keyspace: str, options: Options) -> None:
        self.keyspace = keyspace
        self.options = options
        self.consistency = ConsistencyLevel.name_to_value[options.consistency]
        self.serial = ConsistencyLevel.name_to_value[options.serial_consistency]
        self._prepared: dict[str, PreparedStatement] = {}
        self._lock = threading.Lock()
        self._closed = False
        profile = ExecutionProfile(
            load_balancing_policy=RoundRobinPolicy(), consistency_level=self.consistency,
            serial_consistency_level=self.serial, request_timeout=options.request_timeout,
        )
        auth = (
            PlainTextAuthProvider(username=options.username, password=options.password)
            if options.username is not None else None
        )
        ssl_context = _ssl_context(options.ssl)
        with translating():  # the driver resolves the contact points here (UnresolvableContactPoints)
            self.cluster = Cluster(
                # (host, port) pairs: each node may listen on its own port (the driver learns
                # the others' ports from system.peers_v2).
                list(contact_points), protocol_version=5,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile}, auth_provider=auth,
                ssl_context=ssl_context, connect_timeout=options.connect_timeout,
                control_connection_timeout=options.connect_timeout,
                reconnection_policy=ConstantReconnectionPolicy(0.5, None), idle_heartbeat_interval=5,
                schema_metadata_enabled=False, token_metadata_enabled=False,
            )
            self.session = self.cluster.connect()

    # -- statements -------------------------------------------------------------------
    def prepare(self, query: str) -> PreparedStatement:
        with self._lock:
            statement = self._prepared.get(query)
        if statement is None:
            with translating():
                # Tables qualified with the keyspace ({ks}), not a session-wide USE: the server
                # warns about USE with prepared statements.
                statement = self.session.prepare(query.format(ks=self.keyspace))
            with self._lock:
                self._prepared[query] = statement
        return statement

    def execute(
        self, query: str, params: Sequence[Any] = (), *, serial: bool = False, timeout: float | None = None,
        prepared: bool = True,
    ) -> list[Any]:
        """Run one statement; rows as named tuples. ``serial``: read at serial consistency."""
        self._check_open()
        with translating():
            if not prepared:  # DDL and one-off statements: plain text, the profile's consistency
                return list(self.session.execute(query, params or None, timeout=self._timeout(timeout)))
            bound = self.prepare(query).bind(params)
            if serial:
                bound.consistency_level = self.serial
            return list(self.session.execute(bound, timeout=self._timeout(timeout)))

    def cas(
        self, query: str, params: Sequence[Any], *, resolve: Callable[[], bool], timeout: float | None = None
    ) -> CasResult:
        """Run one LWT. Unknown outcome: ``resolve()`` (a SERIAL read) says whether it landed."""
        self._check_open()
        statement = self.prepare(query)
        bound = statement.bind(params)
        bound.serial_consistency_level = self.serial
        try:
            rows = list(self.session.execute(bound, timeout=self._timeout(timeout)))
        except UNKNOWN_OUTCOME as exc:
            log.info("LWT outcome unknown; resolving with a SERIAL read", extra={"error": repr(exc)[:200]})
            try:
                applied = resolve()
            except OutcomeUnknownError:
                raise  # the resolution itself found the outcome unknowable
            except BackendUnavailableError as unresolved:
                raise OutcomeUnknownError(
                    f"compare-and-set outcome unknown ({type(exc).__name__}) and the SERIAL read failed: {unresolved}"
                ) from exc
            return CasResult(applied, None)
        except Exception as exc:
            raise translate(exc) from exc
        if not rows:
            return CasResult(True, None)
        row = rows[0]._asdict()
        applied = bool(row.pop("applied"))  # "[applied]", as the driver's named tuples spell it
        return CasResult(applied, None if applied else row)

    def _timeout(self, timeout: float | None) -> float:
        limit = self.options.request_timeout
        return limit if timeout is None else max(0.05, min(timeout, limit))

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this cassandra coordinator was closed")

    def close(self) -> None:
        self._closed = True
        try:
            self.cluster.shutdown()
        except Exception as exc:  # shutting down a broken connection must not fail close()
            log.debug("driver shutdown failed", extra={"error": repr(exc)})


def _ssl_context(settings: dict[str, Any] | None) -> ssl_module.SSLContext | None:
    """The TLS context of the ``ssl`` option; InvalidArgumentError when a file it names
    cannot be read or holds no certificate or key (ssl.SSLError is an OSError)."""
    if settings is None:
        return None
    try:
        context = ssl_module.create_default_context(cafile=settings.get("ca_file"))
        context.check_hostname = bool(settings.get("check_hostname", True))
        if settings.get("certfile"):
            context.load_cert_chain(settings["certfile"], settings.get("keyfile"))
    except OSError as exc:
        raise InvalidArgumentError(f"cassandra backend: ssl: cannot load {sorted(settings)}: {exc}") from None
    return context
