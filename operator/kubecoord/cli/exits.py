"""Exit statuses of the ``kubecoord`` command, and the one place errors become them.

=====  ==========================================================================
code   meaning
=====  ==========================================================================
0      success (``watch``: stopped with Ctrl-C)
1      an unexpected error (a bug: the message says what failed)
2      bad usage: unknown option, malformed URL, key or name (nothing was sent)
3      safety violations found (``analyze``; ``kubecoord-testkit soak``)
4      not found: the key, the resource or the input does not exist
5      conflict: the key already exists, or the expected version is stale
6      backend unavailable: unreachable, timed out, session lost
7      permission denied by the backend (HTTP 401/403, ZooKeeper NoAuth)
=====  ==========================================================================
"""

from __future__ import annotations

import sys

from kubecoord.errors import (
    BackendUnavailableError,
    CoordinationError,
    InvalidArgumentError,
    KeyExistsError,
    KeyNotFoundError,
    MemberExistsError,
    MemberNotFoundError,
    PermissionDeniedError,
    VersionConflictError,
)

OK = 0
ERROR = 1
USAGE = 2
VIOLATIONS = 3
NOT_FOUND = 4
CONFLICT = 5
UNAVAILABLE = 6
DENIED = 7


class CommandError(CoordinationError):
    """A failure the command itself detected, with its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class NotFoundError(CommandError):
    def __init__(self, message: str) -> None:
        super().__init__(message, NOT_FOUND)


class UsageError(CommandError):
    def __init__(self, message: str) -> None:
        super().__init__(message, USAGE)


_BY_CLASS: tuple[tuple[type[BaseException], int], ...] = (
    (CommandError, ERROR),  # its own .status wins, see status_of
    (InvalidArgumentError, USAGE),
    (KeyNotFoundError, NOT_FOUND),
    (MemberNotFoundError, NOT_FOUND),
    (KeyExistsError, CONFLICT),
    (VersionConflictError, CONFLICT),
    (MemberExistsError, CONFLICT),
    (BackendUnavailableError, UNAVAILABLE),
    (TimeoutError, UNAVAILABLE),
    (PermissionDeniedError, DENIED),
)


def status_of(error: BaseException) -> int:
    if isinstance(error, CommandError):
        return error.status
    for cls, status in _BY_CLASS:
        if isinstance(error, cls):
            return status
    return ERROR


def report(command: str, error: BaseException, *, prog: str = "kubecoord") -> int:
    """Print ``PROG COMMAND: message`` on stderr; return the exit status."""
    status = status_of(error)
    message = str(error) or type(error).__name__
    if isinstance(error, TimeoutError):
        message = f"timed out waiting for the backend ({message})"
    if status == ERROR and not isinstance(error, CommandError):
        message = f"{type(error).__name__}: {message}"
    print(f"{prog} {command}: {message}", file=sys.stderr)
    return status
