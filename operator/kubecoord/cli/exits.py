"""Exit statuses of the ``kubecoord`` command, and the one place errors become them.

MEANINGS below is the one table: ``kubecoord --help`` prints it, docs/cli.md shows it,
and a test checks that every code used here has exactly one line in it.
"""

from __future__ import annotations

import sys

from kubecoord.errors import (
    BackendUnavailableError,
    CoordinationError,
    FencedError,
    InvalidArgumentError,
    KeyExistsError,
    KeyNotFoundError,
    MemberExistsError,
    MemberNotFoundError,
    NamespaceNotFoundError,
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
MALFORMED_INPUT = 8

MEANINGS: tuple[tuple[int, str], ...] = (
    (OK, "success (watch: stopped with Ctrl-C)"),
    (ERROR, "an unexpected error (a bug: the message says what failed)"),
    (USAGE, "bad usage: unknown option, malformed URL, key or name (nothing was sent)"),
    (VIOLATIONS, "safety violations found (analyze; kubecoord-testkit soak, robustness)"),
    (NOT_FOUND, "not found: the namespace, the election, group or store, or the key"),
    (CONFLICT, "conflict: the key already exists, the expected version is stale, or the write was fenced"),
    (UNAVAILABLE, "backend unavailable: unreachable, timed out, session lost"),
    (DENIED, "permission denied by the backend (HTTP 401/403, ZooKeeper NoAuth)"),
    (MALFORMED_INPUT, "analyze: more than --max-malformed of the input lines were malformed (the report is written)"),
)
"""Every exit status and what it means, once."""


def table() -> str:
    """The exit statuses as the lines of ``--help``'s epilog."""
    return "exit statuses:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in MEANINGS)


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
    (FencedError, CONFLICT),
    (MemberExistsError, CONFLICT),
    (NamespaceNotFoundError, NOT_FOUND),  # before its base class, BackendUnavailableError
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
