"""cassandra-driver's exceptions -> kubecoord.errors, in one place.

Every statement goes through kubecoord.backends.cassandra.session, which maps what the
driver raises by class, never by message. A lightweight transaction (LWT) whose outcome
is unknown (a CAS write timeout, a client-side timeout, a connection lost after sending)
is not an error here: session.Session.cas resolves it with a SERIAL read first.
"""

from __future__ import annotations

import cassandra
from cassandra import cluster as driver_cluster
from cassandra import connection as driver_connection
from cassandra import protocol as driver_protocol

from kubecoord._core.translation import ErrorRow, Translator
from kubecoord.errors import (
    BackendUnavailableError,
    InvalidArgumentError,
    PermissionDeniedError,
)

UNKNOWN_OUTCOME: tuple[type[BaseException], ...] = (
    cassandra.WriteTimeout,
    cassandra.OperationTimedOut,
    cassandra.WriteFailure,
    driver_connection.ConnectionException,
    driver_cluster.NoHostAvailable,
)
"""What an LWT may raise after its proposal reached a replica: the write may or may not
have been applied (Cassandra's CAS write timeout says so explicitly)."""

_TABLE: list[ErrorRow] = [
    (cassandra.AuthenticationFailed, PermissionDeniedError, "Cassandra authentication failed"),
    (cassandra.UnresolvableContactPoints, BackendUnavailableError, "no Cassandra contact point could be resolved"),
    (cassandra.Unauthorized, PermissionDeniedError, "Cassandra refused the statement (unauthorized)"),
    (cassandra.Unavailable, BackendUnavailableError, "not enough Cassandra replicas alive"),
    (cassandra.ReadTimeout, BackendUnavailableError, "Cassandra read timed out"),
    (cassandra.WriteTimeout, BackendUnavailableError, "Cassandra write timed out"),
    (cassandra.ReadFailure, BackendUnavailableError, "Cassandra read failed on replicas"),
    (cassandra.WriteFailure, BackendUnavailableError, "Cassandra write failed on replicas"),
    (cassandra.OperationTimedOut, BackendUnavailableError, "no answer from Cassandra in time"),
    (cassandra.CoordinationFailure, BackendUnavailableError, "Cassandra coordination failed"),
    (cassandra.RequestExecutionException, BackendUnavailableError, "Cassandra could not execute the request"),
    (driver_cluster.NoHostAvailable, BackendUnavailableError, "no Cassandra host reachable"),
    (driver_connection.ConnectionException, BackendUnavailableError, "connection to Cassandra lost"),
    (cassandra.InvalidRequest, InvalidArgumentError, "Cassandra rejected the statement"),
    (cassandra.RequestValidationException, InvalidArgumentError, "Cassandra rejected the statement"),
    (driver_protocol.RequestValidationException, InvalidArgumentError, "Cassandra rejected the statement"),
    (driver_protocol.ErrorMessage, BackendUnavailableError, "Cassandra answered with an error"),
    (cassandra.DriverException, BackendUnavailableError, "Cassandra driver error"),
]


DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    cassandra.DriverException,
    cassandra.RequestExecutionException,
    cassandra.RequestValidationException,
    driver_cluster.NoHostAvailable,
    driver_connection.ConnectionException,
    cassandra.OperationTimedOut,
    cassandra.AuthenticationFailed,
    driver_protocol.ErrorMessage,
)


_TRANSLATOR = Translator(_TABLE, client="Cassandra", catch=DRIVER_ERRORS)
translate = _TRANSLATOR.translate
translating = _TRANSLATOR.translating
