"""kazoo's exceptions -> kubecoord.errors, in one place.

Every public method of the zookeeper backend runs inside ``translating()``, so no kazoo
exception reaches a caller. Callers that give an error a more specific meaning (a
NodeExists on join() is a MemberExistsError, on put() a KeyExistsError) catch the kazoo
exception themselves before it gets here; what is left is mapped by class, never by
message.

A KV write ZooKeeper did not answer raises OutcomeUnknownError (session.Session.write)
instead of the rows below. The election's and membership's writes keep the rows: their
creates find their node again by its name after a lost answer (election.py,
membership.py), and a resign's or close's delete that got no answer is sent again on
reconnection instead of failing the call. Reads are retried; writes are not.
"""

from __future__ import annotations

from kazoo import exceptions as kz
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import RetryFailedError

from kubecoord._core.translation import ErrorRow, Translator
from kubecoord.errors import (
    BackendUnavailableError,
    ClosedError,
    CoordinationError,
    InvalidArgumentError,
    KeyExistsError,
    KeyNotFoundError,
    PermissionDeniedError,
    VersionConflictError,
)

# Order matters: the first matching class wins (ConnectionClosedError is a SessionExpiredError).
_TABLE: list[ErrorRow] = [
    (kz.ConnectionClosedError, ClosedError, "the ZooKeeper client was closed"),
    (kz.ConnectionLoss, BackendUnavailableError, "connection to ZooKeeper lost"),
    (kz.SessionExpiredError, BackendUnavailableError, "ZooKeeper session expired"),
    (kz.SessionMovedError, BackendUnavailableError, "ZooKeeper session moved to another server"),
    (kz.OperationTimeoutError, BackendUnavailableError, "ZooKeeper operation timed out"),
    (kz.RequestTimeoutError, BackendUnavailableError, "ZooKeeper request timed out"),
    (kz.ConnectionDropped, BackendUnavailableError, "connection to ZooKeeper dropped"),
    (kz.ThrottledOpError, BackendUnavailableError, "ZooKeeper throttled the request"),
    (KazooTimeoutError, BackendUnavailableError, "no answer from ZooKeeper in time"),
    (RetryFailedError, BackendUnavailableError, "ZooKeeper unreachable within the retry policy"),
    (kz.NoAuthError, PermissionDeniedError, "ZooKeeper refused access (NoAuth)"),
    (kz.AuthFailedError, PermissionDeniedError, "ZooKeeper authentication failed"),
    (kz.BadVersionError, VersionConflictError, "the znode changed concurrently (BadVersion)"),
    (kz.NodeExistsError, KeyExistsError, "the znode already exists"),
    (kz.NoNodeError, KeyNotFoundError, "the znode does not exist"),
    (kz.BadArgumentsError, InvalidArgumentError, "ZooKeeper rejected the arguments"),
    (kz.InvalidACLError, InvalidArgumentError, "ZooKeeper rejected the ACL"),
    (kz.QuotaExceededError, CoordinationError, "ZooKeeper quota exceeded"),
    (kz.KazooException, CoordinationError, "ZooKeeper error"),
]


_TRANSLATOR = Translator(_TABLE, client="ZooKeeper", catch=(kz.KazooException, KazooTimeoutError))
translate = _TRANSLATOR.translate
translating = _TRANSLATOR.translating
